// `gotap info [--json] BINARY`: what the resolver knows about a binary.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/output/value_text.h"
#include "core/plan/gccgo_binary.h"
#include "core/plan/go_binary.h"
#include "core/plan/plan.h"
#include "frontends/commands.h"
#include "frontends/options.h"

namespace gotap::cli {

namespace {

nlohmann::json info_json(const GoBinary& b) {
  const auto& bi = b.buildinfo();
  const auto& pc = b.pclntab();
  size_t nfuncs = 0, nwrappers = 0;
  for (const auto& f : pc.all_funcs()) (f.is_wrapper ? nwrappers : nfuncs)++;
  nlohmann::json j = {
      {"event", "info"},
      {"path", b.elf().path()},
      {"compiler", "gc"},
      {"go_version", bi.version.raw},
      {"go_version_source", bi.version_source},
      {"module", bi.module_path},
      {"pclntab", pc.format()},
      {"pclntab_addr", hex(pc.addr())},
      {"text_start", hex(pc.text_start())},
      {"moduledata", hex(pc.moduledata().addr)},
      {"stripped", !b.elf().has_symtab()},
      {"dwarf", b.dwarf() != nullptr},
      {"pie", b.elf().is_pie()},
      {"cgo", b.cgo()},
      {"regabi", b.regabi()},
      {"section_headers", !b.elf().sections().empty()},
      {"functions", nfuncs},
      {"abi_wrappers", nwrappers},
      {"goid_offset", b.offsets().g_goid},
      {"offsets_source", b.offsets().source},
  };
  // Inlined calls that get a probe, and those with no instruction that runs exactly once per
  // call, which are never probed (docs/design.md, "Inlined calls").
  auto inl = b.inline_stats();
  j["inlined_calls"] = {{"probed", inl.probed}, {"skipped", inl.skipped}};
  if (b.dwarf()) j["dwarf_producer"] = b.dwarf()->producer();
  // Where the DWARF came from: the binary itself, or a separate debug file and how it was
  // found (debuglink, build-id, debuginfod).
  j["dwarf_source"] = !b.dwarf() ? "none" : b.debug_file() ? b.debug_file()->found_by : "binary";
  if (b.debug_file()) j["debug_file"] = b.debug_file()->path;
  // How many functions get each kind of signature (funcs' "signature"), e.g. how much the
  // method tables recover on a stripped binary.
  nlohmann::json sigs = nlohmann::json::object();
  for (const auto& [source, n] : b.signature_counts()) sigs[source] = n;
  j["signatures"] = sigs;
  // The moduledata layout the type data was read with, and what gotap could not read and why
  // (the same lines trace and funcs print on stderr).
  j["moduledata_layout"] = pc.moduledata_layout();
  j["warnings"] = b.warnings();
  return j;
}

}  // namespace

int cmd_info(const Args& args) {
  po::options_description desc("gotap info [--json] BINARY");
  desc.add_options()("help,h", "show this help")("json", "one JSON object (docs/cli.md)");
  add_debuginfo_options(desc);
  auto vm = parse_options(args, desc, "binary");
  if (!vm) return report_error(vm.error());
  if (vm->count("help")) {
    std::cout << desc;
    return 0;
  }
  auto pos = positionals(*vm, "binary");
  if (pos.size() != 1) return usage_error("info takes exactly one BINARY (see gotap info --help)");
  auto bin = GoBinary::open(pos[0], open_options(*vm));
  nlohmann::json j;
  if (bin) {
    for (const auto& w : (*bin)->warnings())
      std::cerr << "gotap: warning: " << printable_text(w) << "\n";
    j = info_json(**bin);
  } else {
    if (!GccgoBinary::is_gccgo(pos[0])) return report_error(bin.error());
    auto gccgo = GccgoBinary::open(pos[0]);
    if (!gccgo) return report_error(gccgo.error());
    for (const auto& w : (*gccgo)->warnings())
      std::cerr << "gotap: warning: " << printable_text(w) << "\n";
    j = (*gccgo)->info_json();
  }
  if (vm->count("json")) {
    // "event" first, as on every line gotap prints (docs/json.md); the rest stays sorted.
    nlohmann::ordered_json line;
    line["event"] = j.value("event", "info");
    for (const auto& [k, v] : j.items())
      if (k != "event") line[k] = v;
    std::cout << line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
              << "\n";
    return 0;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "event") continue;
    std::string v = it->is_string()
                        ? printable(it->get<std::string>())
                        : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::cout << fmt::format("{:<18} {}\n", it.key() + ":", v);
  }
  return 0;
}

}  // namespace gotap::cli
