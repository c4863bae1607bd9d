#include "backends/ebpf/value_chain.h"

#include <bpf/bpf.h>

#include <string>

#include "backends/ebpf/probe_config.h"
#include "core/binary/type_names.h"
#include "core/plan/binary_view.h"

namespace gotap::ebpf {

namespace {

// Go's %T spellings, with the package path where the short one could be another package's.
const char* const kFollowed[] = {
    "*errors.errorString", "*fmt.wrapError", "*fmt.wrapErrors", "*io/fs.PathError",
    "*os.SyscallError",    "*net.OpError",   "*net/url.Error",  "*net.DNSError",
    "*net.AddrError",      "*net.TCPAddr",   "*net.UDPAddr",    "*net.IPAddr",
    "*net.UnixAddr",       "syscall.Errno",  "string",          "[]uint8",
};

bool is_bytes(MemoryReader& mem, const RtypeEnv& env, const RType& t) {
  if (t.kind != GoKind::Slice) return false;
  auto e = read_rtype(mem, env, t.elem);
  return e && e->kind == GoKind::Uint8;
}

// What the data word points to, and its string and interface fields.
std::optional<gotap_chain_type> layout_of(MemoryReader& mem, const RtypeEnv& env, uint64_t addr) {
  auto t = read_rtype(mem, env, addr);
  if (!t) return std::nullopt;
  // A pointer type's value is its element (the data word is the pointer); another type's is
  // itself (the data word points to a copy of it).
  std::optional<RType> v = t;
  if (t->kind == GoKind::Ptr) v = read_rtype(mem, env, t->elem);
  if (!v || v->size == 0 || v->size > GOTAP_CHAIN_MAX_SIZE) return std::nullopt;
  gotap_chain_type out{};
  out.size = static_cast<uint8_t>(v->size);
  auto add = [&](uint8_t kind, uint64_t off) {
    if (out.nfields < GOTAP_CHAIN_FIELDS && off + 16 <= v->size && off % 8 == 0)
      out.fields[out.nfields++] = {kind, static_cast<uint8_t>(off)};
  };
  if (v->kind == GoKind::String || is_bytes(mem, env, *v)) {
    add(GOTAP_CHAIN_STR, 0);
  } else if (v->kind == GoKind::Struct) {
    for (const auto& f : v->fields) {
      auto ft = read_rtype(mem, env, f.type);
      if (!ft) continue;
      if (ft->kind == GoKind::String || is_bytes(mem, env, *ft)) {
        add(GOTAP_CHAIN_STR, f.offset);
      } else if (ft->kind == GoKind::Interface) {
        // An interface type's methods slice is at 56 (its length at 64): none, an `any`.
        const bool eface = mem.u64(f.type + 64).value_or(0) == 0;
        add(eface ? GOTAP_CHAIN_EFACE : GOTAP_CHAIN_IFACE, f.offset);
      }
    }
  } else if (t->kind == GoKind::Ptr) {
    return std::nullopt;
  }
  // Other values (syscall.Errno) are their bytes alone.
  return out;
}

}  // namespace

std::vector<ChainType> chain_types(const ElfFile& elf, const RtypeEnv& env,
                                   const TypeNames& names) {
  ElfMemoryReader mem(elf, 0);
  std::vector<ChainType> out;
  for (const char* name : kFollowed)
    for (uint64_t addr : names.find(name))
      if (auto l = layout_of(mem, env, addr)) out.push_back({addr, *l});
  return out;
}

std::vector<ChainType> chain_types(const ElfFile& elf, const RtypeEnv& env,
                                   const TypeGraph& dwarf) {
  ElfMemoryReader mem(elf, 0);
  std::vector<ChainType> out;
  for (const char* name : kFollowed) {
    const GoType* t = dwarf.by_name(name);
    if (!t || !t->runtime_type) continue;
    const uint64_t addr = env.types + t->runtime_type;
    if (auto l = layout_of(mem, env, addr)) out.push_back({addr, *l});
  }
  return out;
}

Result<void> write_chain_types(int fd, const ProbeConfig& cfg, const BinaryView& bin) {
  bool any = false;
  for (const auto& r : cfg.records)
    for (int i = 0; i < r.ncaps && !any; ++i) any = r.caps[i].kind == GOTAP_CAP_CHAIN;
  if (!any || !bin.elf || !bin.type_names) return {};
  const auto types = bin.dwarf && bin.types ? chain_types(*bin.elf, bin.rt, *bin.types)
                                            : chain_types(*bin.elf, bin.rt, *bin.type_names);
  for (const ChainType& t : types)
    if (bpf_map_update_elem(fd, &t.addr, &t.layout, BPF_ANY) != 0)
      return errno_error(ErrorKind::Runtime, "cannot configure the interface types");
  return {};
}

}  // namespace gotap::ebpf
