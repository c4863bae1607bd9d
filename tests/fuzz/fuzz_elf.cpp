// libFuzzer target: ElfFile::from_bytes and every accessor on arbitrary bytes.
#include <cstddef>
#include <cstdint>

#include "core/binary/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = gotap::ElfFile::from_bytes({data, size});
  if (!elf.ok()) return 0;
  const gotap::ElfFile& e = **elf;
  volatile uint64_t sink = e.type() + e.entry() + e.is_pie() + e.has_symtab() + e.bytes().size();
  for (const auto& s : e.sections()) {
    auto d = e.section_data(s);
    if (!d.empty()) sink = sink + d[0] + d[d.size() - 1];
    if (e.section(s.name) == nullptr) __builtin_trap();
    for (uint64_t a : {s.addr, s.addr + s.size - 1, s.addr + s.size}) {
      auto b = e.at_vaddr(a);
      if (!b.empty()) sink = sink + b[0] + b[b.size() - 1];
      sink = sink + e.read(a, 8).size() + e.read_u64(a).value_or(0) + e.read_u32(a).value_or(0) +
             e.vaddr_to_offset(a).value_or(0);
    }
  }
  for (const auto& s : e.segments()) {
    for (uint64_t a : {s.vaddr, s.vaddr + s.filesz - 1, s.vaddr + s.memsz, s.vaddr - 1}) {
      auto b = e.at_vaddr(a);
      if (!b.empty()) sink = sink + b[0] + b[b.size() - 1];
      sink = sink + e.read(a, 16).size() + e.read(a, UINT64_MAX).size() +
             e.read_u64(a).value_or(0) + e.vaddr_to_offset(a).value_or(0);
    }
  }
  for (const auto& s : e.symbols()) {
    if (e.symbol(s.name) == nullptr) __builtin_trap();
    sink = sink + e.read_u64(s.value).value_or(0);
  }
  sink = sink + (e.symbol("runtime.text") != nullptr) + (e.section(".gopclntab") != nullptr);
  (void)sink;
  return 0;
}
