#include "core/binary/rtype.h"

#include "core/binary/gccgo_rtype.h"

#include <elf.h>

#include <cstring>

namespace gotap {

bool ElfMemoryReader::read(uint64_t addr, void* buf, size_t n) {
  if (addr < bias_) return false;
  Bytes b = elf_.read(addr - bias_, n);
  if (b.size() != n) return false;
  std::memcpy(buf, b.data(), n);
  return true;
}

ImmutableElfMemoryReader::ImmutableElfMemoryReader(const ElfFile& elf) : elf_(elf) {
  for (const auto& seg : elf.segments()) {
    bool ro = (seg.type == PT_LOAD && !(seg.flags & PF_W)) || seg.type == PT_GNU_RELRO;
    if (ro && seg.filesz) ranges_.emplace_back(seg.vaddr, seg.vaddr + seg.filesz);
  }
}

bool ImmutableElfMemoryReader::read(uint64_t addr, void* buf, size_t n) {
  for (auto [lo, hi] : ranges_) {
    if (addr < lo || addr >= hi || hi - addr < n) continue;
    Bytes b = elf_.read(addr, n);
    if (b.size() != n) return false;
    std::memcpy(buf, b.data(), n);
    return true;
  }
  return false;
}

std::optional<std::string> read_type_name(MemoryReader& mem, const GoVersion& go, uint64_t addr,
                                          uint8_t* flags) {
  uint8_t hdr[12];
  // The header is short; read it byte-wise when the 12-byte read crosses into unmapped memory.
  size_t have = 0;
  for (; have < sizeof hdr; ++have)
    if (!mem.read(addr + have, &hdr[have], 1)) break;
  if (have < 2) return std::nullopt;
  if (flags) *flags = hdr[0];
  uint64_t len = 0;
  size_t pos = 1;
  if (go.known() && !go.at_least(1, 17)) {
    if (have < 3) return std::nullopt;
    len = (uint64_t(hdr[1]) << 8) | hdr[2];
    pos = 3;
  } else {
    int shift = 0;
    for (;; ++pos) {
      if (pos >= have || shift > 28) return std::nullopt;
      len |= uint64_t(hdr[pos] & 0x7f) << shift;
      shift += 7;
      if (!(hdr[pos] & 0x80)) break;
    }
    ++pos;
  }
  if (len > 4096) return std::nullopt;
  std::string s(len, '\0');
  if (len && !mem.read(addr + pos, s.data(), len)) return std::nullopt;
  return s;
}

namespace {

struct Slice {
  uint64_t ptr = 0, len = 0;
};

bool read_slice(MemoryReader& mem, uint64_t addr, Slice& s) {
  uint64_t w[2];
  if (!mem.read(addr, w, sizeof w)) return false;
  s.ptr = w[0];
  s.len = w[1];
  return true;
}

}  // namespace

GoKind descriptor_kind(const uint8_t* b, const GoVersion& go) {
  uint8_t kind = b[23];
  if (!go.at_least(1, 26)) kind &= 0x1f;  // before 1.26 the top bits are flags
  if (kind == 0 || kind > uint8_t(GoKind::UnsafePointer)) return GoKind::Invalid;
  // Bytes that are no descriptor (a string's data guessed to be an interface's type word, a
  // method-table scan's candidate) rarely pass these: alignments are powers of two, pointer
  // bytes fit in the size.
  auto pow2 = [](uint8_t a) { return a != 0 && a <= 64 && (a & (a - 1)) == 0; };
  uint64_t size, ptrbytes;
  std::memcpy(&size, b, 8);
  std::memcpy(&ptrbytes, b + 8, 8);
  if (!pow2(b[21]) || !pow2(b[22]) || size >= (1ull << 48) || ptrbytes > size)
    return GoKind::Invalid;
  return static_cast<GoKind>(kind);
}

std::optional<RType> read_rtype(MemoryReader& mem, const RtypeEnv& env, uint64_t addr) {
  if (env.gccgo) return read_gccgo_rtype(mem, addr);
  if (addr == 0) return std::nullopt;
  uint8_t b[48];
  if (!mem.read(addr, b, sizeof b)) return std::nullopt;
  GoKind kind = descriptor_kind(b, env.go);
  if (kind == GoKind::Invalid) return std::nullopt;
  RType t;
  t.addr = addr;
  t.kind = kind;
  std::memcpy(&t.size, b, 8);
  std::memcpy(&t.ptrbytes, b + 8, 8);
  t.tflag = b[20];
  std::memcpy(&t.str, b + 40, 4);
  t.direct_iface = env.go.at_least(1, 26) ? t.tflag & 0x20 : b[23] & 0x20;
  switch (t.kind) {
    case GoKind::Ptr:
    case GoKind::Slice:
    case GoKind::Chan:
      t.elem = mem.u64(addr + 48).value_or(0);
      break;
    case GoKind::Array:
      t.elem = mem.u64(addr + 48).value_or(0);
      t.len = static_cast<int64_t>(mem.u64(addr + 64).value_or(0));
      break;
    case GoKind::Map: {
      t.key = mem.u64(addr + 48).value_or(0);
      t.elem = mem.u64(addr + 56).value_or(0);
      t.swiss = env.swiss_maps;
      if (t.swiss && env.go.at_least(1, 27)) {
        // 1.27 (internal/abi/map.go): GroupSize, KeysOff, KeyStride, ElemsOff, ElemStride,
        // ElemOff, Flags, so that GOEXPERIMENT=mapsplitgroup's KKKKVVVV groups read alike.
        uint64_t w[5];
        if (mem.read(addr + 80, w, sizeof w)) {
          t.group_size = w[0];
          t.keys_off = w[1];
          t.key_stride = w[2];
          t.elems_off = w[3];
          t.elem_stride = w[4];
        }
        t.map_flags = mem.u32(addr + 128).value_or(0);
      } else if (t.swiss) {
        // 1.24-1.26: GroupSize, SlotSize, ElemOff, Flags; slots follow the 8-byte ctrl word.
        uint64_t w[3];
        if (mem.read(addr + 80, w, sizeof w) && w[1]) {
          t.group_size = w[0];
          t.keys_off = 8;
          t.key_stride = w[1];
          t.elems_off = 8 + w[2];
          t.elem_stride = w[1];
        }
        t.map_flags = mem.u32(addr + 104).value_or(0);
      } else {
        uint8_t m[8];
        if (mem.read(addr + 80, m, sizeof m)) {
          t.key_size = m[0];
          t.value_size = m[1];
          std::memcpy(&t.bucket_size, m + 2, 2);
          std::memcpy(&t.map_flags, m + 4, 4);
        }
      }
      break;
    }
    case GoKind::Struct: {
      Slice fs;
      if (!read_slice(mem, addr + 56, fs) || fs.len > 4096) break;
      for (uint64_t i = 0; i < fs.len; ++i) {
        uint64_t f[3];
        if (!mem.read(fs.ptr + i * 24, f, sizeof f)) break;
        RField rf;
        uint8_t flags = 0;
        rf.name = read_type_name(mem, env.go, f[0], &flags).value_or("");
        rf.type = f[1];
        if (env.go.at_least(1, 19)) {
          rf.offset = f[2];
          rf.embedded = flags & 8;
        } else {
          rf.offset = f[2] >> 1;
          rf.embedded = f[2] & 1;
        }
        t.fields.push_back(std::move(rf));
      }
      break;
    }
    default:
      break;
  }
  return t;
}

std::string rtype_name(MemoryReader& mem, const RtypeEnv& env, const RType& t) {
  if (env.gccgo) return gccgo_rtype_name(mem, t);
  if (env.types == 0) return "";
  uint64_t at = env.types + static_cast<int64_t>(t.str);
  // Like the runtime's resolveNameOff: names may precede the types (negative offsets, e.g.
  // PIE puts them in .rodata below .data.rel.ro), but never lie past etypes.
  if (env.etypes && at >= env.etypes) return "";
  auto s = read_type_name(mem, env.go, at);
  if (!s) return "";
  if ((t.tflag & kTflagExtraStar) && !s->empty() && (*s)[0] == '*') return s->substr(1);
  return *s;
}

}  // namespace gotap
