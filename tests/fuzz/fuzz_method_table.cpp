// libFuzzer target: the method-table scan, the runtime-type graph and the index of type
// descriptors by name on arbitrary ELF bytes (the type descriptors of a stripped binary are
// as untrusted as its pclntab).
#include <cstddef>
#include <cstdint>

#include "core/binary/elf_file.h"
#include "core/binary/method_table.h"
#include "core/binary/pclntab.h"
#include "core/binary/rtype_graph.h"
#include "core/binary/type_names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto elf = gotap::ElfFile::from_bytes({data, size});
  if (!elf.ok()) return 0;
  auto tab = gotap::Pclntab::load(**elf);
  if (!tab.ok()) return 0;
  // The last byte picks the layouts: Go 1.19 to 1.26, swiss maps or not. (An ELF image ignores
  // what follows it, so seeds stay valid binaries.)
  const uint8_t pick = data[size - 1];
  gotap::RtypeEnv env;
  int minor = 19 + pick % 8;
  env.go = gotap::GoVersion::parse("go1." + std::to_string(minor)).value_or(gotap::GoVersion{});
  env.swiss_maps = minor >= 24 && (pick & 8);
  env.types = tab->moduledata().types;
  env.etypes = tab->moduledata().etypes;
  auto mt = gotap::MethodTables::scan(**elf, *tab, env);
  gotap::TypeGraph g;
  gotap::ElfMemoryReader mem(**elf, 0);
  gotap::RtypeGraphBuilder b(g, mem, env);
  size_t n = 0;
  for (const auto& f : tab->all_funcs()) {
    if (++n > 2000) break;
    auto sig = mt.find(f.entry);
    if (!sig) continue;
    b.add(sig->receiver);
    for (uint64_t t : sig->params) b.add(t);
    for (uint64_t t : sig->results) b.add(t);
  }
  g.index();
  gotap::TypeNames names(**elf, env);
  volatile size_t sink = mt.size() + g.size() + names.size() + names.find("*main.T").size();
  (void)sink;
  return 0;
}
