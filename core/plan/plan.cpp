#include "core/plan/plan.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gotap {

std::string hex(uint64_t v) {
  return fmt::format("{:#x}", v);
}

size_t ProbePlan::probe_count() const {
  size_t n = 0;
  for (const auto& f : funcs) {
    if (f.entry_probe) ++n;
    n += f.ret_sites.size();
    if (f.entry_probe) n += f.tail_jumps.size();  // probed as returns
    if (f.inline_probed) n += f.inline_sites.size();
  }
  return n + (goroutines.status != 0) + (goroutines.create != 0) + goroutines.created.size();
}

nlohmann::ordered_json to_json(const ParamLoc& p) {
  nlohmann::ordered_json j;
  j["name"] = p.name;
  j["type"] = p.type_name;
  j["loc"] = p.loc.describe();
  j["size"] = p.size;
  return j;
}

namespace {

nlohmann::ordered_json addrs(const std::vector<uint64_t>& v) {
  auto a = nlohmann::ordered_json::array();
  for (uint64_t x : v) a.push_back(hex(x));
  return a;
}

nlohmann::ordered_json params(const std::vector<ParamLoc>& v) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& p : v) a.push_back(to_json(p));
  return a;
}

// Addresses are hex strings (docs/json.md); a function that exists only inlined has none.
nlohmann::ordered_json addr_or_null(uint64_t v) {
  return v ? nlohmann::ordered_json(hex(v)) : nlohmann::ordered_json();
}

}  // namespace

nlohmann::ordered_json to_json(const FuncPlan& f) {
  nlohmann::ordered_json j;
  j["event"] = "func";
  j["func"] = f.name;
  j["entry"] = addr_or_null(f.entry);
  j["end"] = addr_or_null(f.end);
  j["entry_probe"] = addr_or_null(f.entry_probe);
  j["ret_sites"] = addrs(f.ret_sites);
  j["args"] = params(f.args);
  j["results"] = params(f.results);
  j["entry_probe_kind"] = f.entry_probe_kind;
  j["entry_refires"] = f.entry_refires;
  j["tail_jumps"] = addrs(f.tail_jumps);
  j["abi"] = f.abi;
  j["args_source"] = f.args_source;
  // Where the signature came from (docs/json.md): dwarf, debuginfo, method-table, arginfo.
  j["signature"] = f.args_source;
  j["frame_size"] = f.frame_size;
  j["file"] = f.file;
  j["line"] = f.line;
  auto sites = [](const std::vector<InlineSite>& from) {
    auto out = nlohmann::ordered_json::array();
    for (const auto& s : from) {
      nlohmann::ordered_json site;
      site["outer"] = s.outer;
      site["pc"] = hex(s.pc);
      site["file"] = s.file;
      site["line"] = s.line;
      if (!s.skip_reason.empty()) site["reason"] = s.skip_reason;
      out.push_back(std::move(site));
    }
    return out;
  };
  j["inline_sites"] = sites(f.inline_sites);
  // Calls inlined where no instruction runs exactly once per call: not probed, not counted.
  j["inline_sites_skipped"] = sites(f.inline_skipped);
  j["inline_probed"] = f.inline_probed;
  if (!f.entry) j["inlined_only"] = true;
  // Inlined copies have no RET of their own: only their entry is probed.
  if (!f.inline_sites.empty()) j["inlined_returns"] = "none";
  return j;
}

}  // namespace gotap
