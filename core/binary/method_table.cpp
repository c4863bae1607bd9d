#include "core/binary/method_table.h"

#include <cstring>

namespace gotap {

namespace {

constexpr uint64_t kTypeSize = 48;      // abi.Type on 64-bit
constexpr uint64_t kUncommonSize = 16;  // abi.UncommonType
constexpr uint64_t kMethodSize = 16;    // abi.Method: name, mtyp, ifn, tfn (int32 each)
constexpr uint64_t kFuncTypeSize = 56;  // abi.FuncType: Type, InCount, OutCount, padding

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

uint64_t descriptor_size(GoKind kind, bool swiss_maps, bool map_strides) {
  switch (kind) {
    case GoKind::Struct:     // PkgPath Name, Fields []StructField
    case GoKind::Interface:  // PkgPath Name, Methods []Imethod
      return kTypeSize + 8 + 24;
    case GoKind::Ptr:
    case GoKind::Slice:
      return kTypeSize + 8;  // Elem
    case GoKind::Array:
      return kTypeSize + 24;  // Elem, Slice, Len
    case GoKind::Chan:
      return kTypeSize + 16;  // Elem, Dir
    case GoKind::Func:
      return kFuncTypeSize;
    case GoKind::Map:
      // Key, Elem, Group/Bucket, Hasher; then GroupSize, KeysOff, KeyStride, ElemsOff,
      // ElemStride, ElemOff, Flags (1.27), GroupSize, SlotSize, ElemOff, Flags (swiss, 1.24+)
      // or KeySize, ValueSize, BucketSize, Flags.
      if (swiss_maps && map_strides) return kTypeSize + 32 + 48 + 8;
      return swiss_maps ? kTypeSize + 32 + 24 + 8 : kTypeSize + 32 + 8;
    case GoKind::Invalid:
      return 0;
    default:
      return kTypeSize;
  }
}

MethodTables MethodTables::scan(const ElfFile& elf, const Pclntab& pcln, const RtypeEnv& env) {
  MethodTables mt;
  mt.elf_ = &elf;
  mt.env_ = env;
  if (!env.types || env.etypes <= env.types) return mt;
  Bytes region = elf.at_vaddr(env.types);
  uint64_t n = std::min<uint64_t>(region.size(), env.etypes - env.types);
  if (n < kTypeSize) return mt;
  const uint8_t* base = region.data();
  const uint64_t text = pcln.moduledata().text ? pcln.moduledata().text : pcln.text_start();
  ElfMemoryReader mem(elf, 0);

  // A func type descriptor at a types offset, or 0.
  auto func_type_at = [&](int32_t off) -> uint64_t {
    if (off < 0 || uint64_t(off) + kFuncTypeSize > n) return 0;
    return descriptor_kind(base + off, env.go) == GoKind::Func ? env.types + off : 0;
  };

  // Descriptors are at least pointer-aligned: try every 8-byte boundary.
  uint64_t first = (8 - (env.types & 7)) & 7;
  for (uint64_t off = first; off + kTypeSize <= n; off += 8) {
    const uint8_t* p = base + off;
    if (!(p[20] & kTflagUncommon)) continue;
    GoKind kind = descriptor_kind(p, env.go);
    if (kind == GoKind::Invalid) continue;
    uint64_t ksize = descriptor_size(kind, env.swiss_maps, env.go.at_least(1, 27));
    if (off + ksize + kUncommonSize > n) continue;
    const uint8_t* u = p + ksize;
    uint16_t mcount = load<uint16_t>(u + 4), xcount = load<uint16_t>(u + 6);
    uint32_t moff = load<uint32_t>(u + 8);
    if (mcount == 0 || xcount > mcount || moff < kUncommonSize) continue;
    uint64_t methods = off + ksize + moff;
    if (methods > n || (n - methods) / kMethodSize < mcount) continue;
    for (uint16_t i = 0; i < mcount; ++i) {
      const uint8_t* m = base + methods + i * kMethodSize;
      int32_t name = load<int32_t>(m), mtyp = load<int32_t>(m + 4), tfn = load<int32_t>(m + 12);
      if (tfn < 0 || mtyp < 0 || name < 0) continue;  // -1: the linker dropped it
      uint64_t ftype = func_type_at(mtyp);
      if (!ftype) continue;
      uint64_t entry = text + uint64_t(tfn);
      const PclnFunc* f = pcln.find(entry);
      if (!f || f->entry != entry) continue;
      auto mname = read_type_name(mem, env.go, env.types + uint64_t(name));
      if (!mname || mname->empty() || f->name.size() <= mname->size() ||
          !f->name.ends_with(*mname) || f->name[f->name.size() - mname->size() - 1] != '.')
        continue;
      mt.by_entry_.try_emplace(entry, Entry{env.types + off, ftype});
    }
  }
  return mt;
}

std::optional<MethodSignature> MethodTables::find(uint64_t entry) const {
  auto it = by_entry_.find(entry);
  if (it == by_entry_.end()) return std::nullopt;
  MethodSignature s;
  s.receiver = it->second.receiver;
  uint64_t ft = it->second.func_type;
  Bytes hdr = elf_->read(ft, kFuncTypeSize);
  if (hdr.size() != kFuncTypeSize) return std::nullopt;
  uint16_t in = load<uint16_t>(hdr.data() + 48), out = load<uint16_t>(hdr.data() + 50);
  s.variadic = out & 0x8000;
  out &= 0x7fff;
  uint64_t params = ft + kFuncTypeSize + ((hdr[20] & kTflagUncommon) ? kUncommonSize : 0);
  Bytes words = elf_->read(params, (uint64_t(in) + out) * 8);
  if (words.size() != (uint64_t(in) + out) * 8) return std::nullopt;
  for (uint32_t i = 0; i < uint32_t(in) + out; ++i) {
    uint64_t t = load<uint64_t>(words.data() + i * 8);
    if (t < env_.types || t >= env_.etypes) return std::nullopt;  // not a descriptor here
    (i < in ? s.params : s.results).push_back(t);
  }
  return s;
}

}  // namespace gotap
