// libFuzzer target: DWARF loading (libdw over arbitrary ELF bytes), the type graph built from
// it, and the ABI assignment over whatever types and parameters come out.
#include <cstddef>
#include <cstdint>

#include "core/binary/dwarf_info.h"
#include "core/binary/elf_file.h"
#include "core/plan/abi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = gotap::ElfFile::from_bytes({data, size});
  if (!elf.ok()) return 0;
  auto dw = gotap::DwarfInfo::load(**elf);
  if (!dw.ok() || !*dw) return 0;
  const gotap::DwarfInfo& d = **dw;
  const gotap::TypeGraph& g = d.types();
  size_t sink = d.producer().size() + static_cast<size_t>(d.version());
  for (const auto& [id, t] : g.all()) {
    sink += g.align_of(id) + t.fields.size();
    if (const gotap::GoType* e = g.get(t.elem)) sink += e->size;
    if (const gotap::GoType* k = g.get(t.key)) sink += k->size;
    if (const gotap::GoType* r = g.by_runtime_type(t.runtime_type)) sink += r->size;
    if (const gotap::GoType* n = g.by_name(t.name)) sink += n->size;
    sink += std::string(gotap::kind_name(t.kind)).size();
  }
  for (const auto& [name, f] : d.funcs()) {
    std::vector<gotap::AbiParamIn> in;
    for (const auto& p : f.params) {
      in.push_back({p.name, p.type, p.is_result});
      if (p.entry_loc) sink += p.entry_loc->size();
    }
    gotap::AbiOptions opts;
    opts.dict = gotap::dict_position(name, 26);
    for (const auto& l : gotap::assign_abi_internal(g, in, opts)) sink += l.loc.describe().size();
    for (const auto& l : gotap::assign_abi0(g, in)) sink += l.loc.describe().size();
    for (const auto& i : d.inlined(name)) sink += i.call_file.size();
  }
  sink += d.member_offset("runtime.g", "goid").value_or(0);
  return sink == 0xdeadbeef ? 1 : 0;
}
