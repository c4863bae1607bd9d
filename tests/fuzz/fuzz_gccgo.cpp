// libFuzzer target: gccgo recognition (DT_NEEDED / DT_SONAME), the symbol tables read by
// hand, the demangler over every name, gccgo's DWARF and the System V assignment of what
// comes out, the type graph built from its type names, morestack_ret over each
// function's bytes, and where runtime.g is (its TLS relocations, PT_TLS).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/binary/elf_file.h"
#include "core/binary/gccgo_dwarf.h"
#include "core/binary/gccgo_symbols.h"
#include "core/plan/gccgo_binary.h"
#include "core/plan/gccgo_g.h"
#include "core/plan/gccgo_types.h"
#include "core/plan/sysv_abi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The demangler on the raw bytes as a name.
  std::string_view raw(reinterpret_cast<const char*>(data), size < 256 ? size : 256);
  volatile size_t sink = gotap::gccgo_demangle(raw).size() + gotap::gcc_clone_suffix(raw).size();
  {
    gotap::GccgoTypes raw_types;  // the raw bytes as a type name ("[][]*string"...)
    sink = sink + raw_types.add(std::string(raw));
    raw_types.finish();
  }
  auto elf = gotap::ElfFile::from_bytes({data, size});
  if (!elf.ok()) return 0;
  const gotap::ElfFile& e = **elf;
  gotap::GccgoFacts facts = gotap::detect_gccgo(e);
  sink = sink + facts.gccgo + facts.needed.size() + facts.soname.size();
  if (auto slot = gotap::tls_module_slot(e, "runtime.g")) sink = sink + *slot;
  for (int major : {0, 12}) sink = sink + gotap::place_gccgo_g(e, facts, major).fs_offset;
  gotap::GccgoSymbols syms = gotap::read_function_symbols(e);
  {
    // The names of pcs (goroutine probes' callers in libgo.so).
    auto funcs = gotap::gccgo_functions(syms);
    for (const auto& f : funcs) sink = sink + gotap::gccgo_func_name(funcs, f.entry + 1).size();
  }
  for (const auto& s : syms.funcs) {
    std::string name = gotap::gccgo_demangle(s.symbol);
    sink = sink + name.size() + gotap::pointer_method_name(s.symbol, name).size() +
           gotap::value_method_spelling(name).size();
    gotap::Bytes code = e.read(s.value, s.size < 4096 ? s.size : 4096);
    uint64_t call = 0;
    if (!code.empty()) sink = sink + gotap::morestack_ret(code, s.value, &call) + call;
  }
  auto dw = gotap::read_gccgo_dwarf(e);
  if (!dw.ok() || !*dw) return 0;
  gotap::GccgoTypes types;
  for (const auto& f : (*dw)->funcs) {
    for (const auto& p : f.params) sink = sink + types.add(p.type.name);
    gotap::SysvAssignment a = gotap::assign_sysv(f);
    for (const auto& p : a.args) sink = sink + p.loc.describe().size();
    for (const auto& p : a.results) sink = sink + p.loc.describe().size();
  }
  types.finish();
  sink = sink + types.graph().size();
  (void)sink;
  return 0;
}
