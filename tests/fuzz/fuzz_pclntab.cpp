// libFuzzer target: Pclntab::load on arbitrary ELF bytes, then every per-function decoder.
#include <cstddef>
#include <cstdint>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = gotap::ElfFile::from_bytes({data, size});
  if (!elf.ok()) return 0;
  auto tab = gotap::Pclntab::load(**elf);
  if (!tab.ok()) return 0;
  const gotap::Pclntab& t = *tab;
  volatile uint64_t sink = t.num_funcs() + t.moduledata().text + t.text_start();
  size_t n = 0;
  for (const auto& f : t.all_funcs()) {
    // Bound the work per input; the early records exercise the same code as the rest.
    if (++n > 2000) break;
    sink = sink + f.name.size() + (t.find(f.entry) != nullptr) + t.lookup(f.name).size();
    sink = sink + t.sp_delta(f, f.entry).value_or(0) + t.sp_delta(f, f.end - 1).value_or(0);
    sink = sink + t.pcvalue(f.pcln, f.entry, f.entry + (f.end - f.entry) / 2).value_or(0);
    if (auto fl = t.file_line(f, f.entry)) sink = sink + fl->first.size() + fl->second;
    for (int i = 0; i < 8; ++i) sink = sink + t.pcdata(f, i) + t.funcdata(f, i).value_or(0);
    for (const auto& c : t.inline_tree(f)) sink = sink + c.name.size() + c.parent_pc;
    for (const auto& r : t.inline_ranges(f)) sink = sink + r.lo + r.hi;
    if (auto ai = t.arg_info(f)) sink = sink + ai->size();
    sink = sink + t.decode_pcvalue(f.pcsp, f.entry, f.end).size();
    t.pcvalue_runs(f.pcfile, f.entry,
                   [&](uint64_t lo, uint64_t hi, int32_t v) { sink = sink + lo + hi + v; });
  }
  (void)sink;
  return 0;
}
