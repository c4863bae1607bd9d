#include "core/plan/plan_json.h"

#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>

namespace gotap {

void append_json_string(std::string& out, std::string_view s) {
  // Names, files and types are plain ASCII almost always: copied as they are. Anything else
  // (quotes, control bytes, UTF-8, invalid bytes) goes through nlohmann, whose escaping and
  // replacement the output has always had.
  bool plain = true;
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

void key(std::string& out, std::string_view k) {
  // Keys are ASCII literals: no escaping.
  out += '"';
  out += k;
  out += "\":";
}

void hex_string(std::string& out, uint64_t v) {
  fmt::format_to(std::back_inserter(out), "\"{:#x}\"", v);
}

void addr_or_null(std::string& out, uint64_t v) {
  if (v)
    hex_string(out, v);
  else
    out += "null";
}

void addrs(std::string& out, const std::vector<uint64_t>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    hex_string(out, v[i]);
  }
  out += ']';
}

void params(std::string& out, const std::vector<ParamLoc>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    const ParamLoc& p = v[i];
    if (i) out += ',';
    out += '{';
    key(out, "name");
    append_json_string(out, p.name);
    out += ',';
    key(out, "type");
    append_json_string(out, p.type_name);
    out += ',';
    key(out, "loc");
    append_json_string(out, p.loc.describe());
    out += ',';
    key(out, "size");
    fmt::format_to(std::back_inserter(out), "{}", p.size);
    out += '}';
  }
  out += ']';
}

void sites(std::string& out, const std::vector<InlineSite>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    const InlineSite& s = v[i];
    if (i) out += ',';
    out += '{';
    key(out, "outer");
    append_json_string(out, s.outer);
    out += ',';
    key(out, "pc");
    hex_string(out, s.pc);
    out += ',';
    key(out, "file");
    append_json_string(out, s.file);
    out += ',';
    key(out, "line");
    fmt::format_to(std::back_inserter(out), "{}", s.line);
    if (!s.skip_reason.empty()) {
      out += ',';
      key(out, "reason");
      append_json_string(out, s.skip_reason);
    }
    out += '}';
  }
  out += ']';
}

const char* boolean(bool b) {
  return b ? "true" : "false";
}

}  // namespace

// The keys and their order are to_json(const FuncPlan&)'s (core/plan/plan.cpp).
void append_json_line(std::string& out, const FuncPlan& f) {
  out += "{\"event\":\"func\",";
  key(out, "func");
  append_json_string(out, f.name);
  out += ',';
  key(out, "entry");
  addr_or_null(out, f.entry);
  out += ',';
  key(out, "end");
  addr_or_null(out, f.end);
  out += ',';
  key(out, "entry_probe");
  addr_or_null(out, f.entry_probe);
  out += ',';
  key(out, "ret_sites");
  addrs(out, f.ret_sites);
  out += ',';
  key(out, "args");
  params(out, f.args);
  out += ',';
  key(out, "results");
  params(out, f.results);
  out += ',';
  key(out, "entry_probe_kind");
  append_json_string(out, f.entry_probe_kind);
  out += ',';
  key(out, "entry_refires");
  out += boolean(f.entry_refires);
  out += ',';
  key(out, "tail_jumps");
  addrs(out, f.tail_jumps);
  out += ',';
  key(out, "abi");
  append_json_string(out, f.abi);
  out += ',';
  key(out, "args_source");
  append_json_string(out, f.args_source);
  out += ',';
  key(out, "signature");
  append_json_string(out, f.args_source);
  out += ',';
  key(out, "frame_size");
  fmt::format_to(std::back_inserter(out), "{}", f.frame_size);
  out += ',';
  key(out, "file");
  append_json_string(out, f.file);
  out += ',';
  key(out, "line");
  fmt::format_to(std::back_inserter(out), "{}", f.line);
  out += ',';
  key(out, "inline_sites");
  sites(out, f.inline_sites);
  out += ',';
  key(out, "inline_sites_skipped");
  sites(out, f.inline_skipped);
  out += ',';
  key(out, "inline_probed");
  out += boolean(f.inline_probed);
  if (!f.entry) out += ",\"inlined_only\":true";
  if (!f.inline_sites.empty()) out += ",\"inlined_returns\":\"none\"";
  out += "}\n";
}

}  // namespace gotap
