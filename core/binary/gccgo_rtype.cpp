// gccgo's type descriptors (libgo's runtime/type.go, as gccgo 12 lays them out, checked against
// a gccgo-12 program's own reflect and by tests/unit/test_runtime_gccgo.cpp): the common part is
// gc's of Go 1.14 to 1.20 but for the name, a pointer to a Go string ("\tmain\tmain.S": the package
// path between tabs) where gc has a name offset, and 16 more bytes, so the kind-specific fields
// start at 64:
//   size 0, ptrdata 8, hash 16, tflag 20, align 21, fieldAlign 22, kind 23 (0x20: direct),
//   equal 24, gcdata 32, string 40, uncommon 48, ptrToThis 56;
//   ptr/slice/chan: elem 64; array: elem 64, slice 72, len 80; map: key 64, elem 72;
//   interface: methods []imethod at 64; struct: fields []structField at 64, each 40 bytes
//   {name *string, pkgPath *string, typ, tag *string, offset << 1 | embedded}.
#include "core/binary/gccgo_rtype.h"

#include <cstring>

namespace gotap {

namespace {

constexpr uint64_t kMaxName = 4096;
constexpr uint64_t kMaxFields = 4096;

// A Go string whose header is at addr.
std::optional<std::string> go_string_at(MemoryReader& mem, uint64_t addr) {
  uint64_t h[2];
  if (!addr || !mem.read(addr, h, sizeof h) || h[1] > kMaxName) return std::nullopt;
  std::string s(h[1], '\0');
  if (h[1] && !mem.read(h[0], s.data(), s.size())) return std::nullopt;
  return s;
}

}  // namespace

std::string gccgo_type_string(std::string_view s) {
  // What reflect's String gives: the quoted package paths left out.
  std::string out;
  bool quoted = false;
  for (char c : s) {
    if (c == '\t')
      quoted = !quoted;
    else if (!quoted)
      out += c;
  }
  return out;
}

std::optional<RType> read_gccgo_rtype(MemoryReader& mem, uint64_t addr) {
  if (addr == 0) return std::nullopt;
  uint8_t b[64];
  if (!mem.read(addr, b, sizeof b)) return std::nullopt;
  const uint8_t kind = b[23] & 31;
  const uint8_t align = b[21], field_align = b[22];
  auto pow2 = [](uint8_t a) { return a != 0 && (a & (a - 1)) == 0 && a <= 64; };
  if (kind == 0 || kind > static_cast<uint8_t>(GoKind::UnsafePointer) || !pow2(align) ||
      !pow2(field_align))
    return std::nullopt;
  RType t;
  t.addr = addr;
  t.kind = static_cast<GoKind>(kind);
  std::memcpy(&t.size, b, 8);
  std::memcpy(&t.ptrbytes, b + 8, 8);
  if (t.ptrbytes > t.size) return std::nullopt;
  t.tflag = b[20];
  t.direct_iface = b[23] & 0x20;
  std::memcpy(&t.gccgo_string, b + 40, 8);
  switch (t.kind) {
    case GoKind::Ptr:
    case GoKind::Slice:
    case GoKind::Chan:
      t.elem = mem.u64(addr + 64).value_or(0);
      break;
    case GoKind::Array:
      t.elem = mem.u64(addr + 64).value_or(0);
      t.len = static_cast<int64_t>(mem.u64(addr + 80).value_or(0));
      break;
    case GoKind::Map:
      t.key = mem.u64(addr + 64).value_or(0);
      t.elem = mem.u64(addr + 72).value_or(0);
      break;
    case GoKind::Interface:
      t.gccgo_methods = mem.u64(addr + 72).value_or(0);
      break;
    case GoKind::Struct: {
      uint64_t fs[2];
      if (!mem.read(addr + 64, fs, sizeof fs) || fs[1] > kMaxFields) break;
      for (uint64_t i = 0; i < fs[1]; ++i) {
        uint64_t f[5];
        if (!mem.read(fs[0] + i * 40, f, sizeof f)) break;
        RField rf;
        rf.name = go_string_at(mem, f[0]).value_or("");
        rf.type = f[2];
        rf.offset = f[4] >> 1;
        rf.embedded = f[4] & 1;
        t.fields.push_back(std::move(rf));
      }
      break;
    }
    default:
      break;
  }
  return t;
}

std::string gccgo_rtype_name(MemoryReader& mem, const RType& t) {
  return gccgo_type_string(go_string_at(mem, t.gccgo_string).value_or(""));
}

}  // namespace gotap
