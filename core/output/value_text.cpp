#include "core/output/value_text.h"

#include <fmt/format.h>

namespace gotap {

std::string quote_go_string(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\r':
        out += "\\r";
        continue;
      default:
        break;
    }
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    // Multi-byte UTF-8 is kept only when it is a printable code point; C1 controls
    // (U+0080..U+009F, e.g. the 8-bit CSI) and anything malformed are escaped.
    int len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool valid = len > 0 && i + len <= s.size();
    uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; valid && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (valid && cp >= 0xA0 && cp != 0x2028 && cp != 0x2029 && !(cp >= 0xD800 && cp <= 0xDFFF)) {
      out.append(s, i, len);
      i += len - 1;
    } else if (valid && cp >= 0x80) {
      out += fmt::format("\\u{:04x}", cp);
      i += len - 1;
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out.push_back('"');
  return out;
}

std::string printable(const std::string& s) {
  std::string q = quote_go_string(s);
  return q.size() == s.size() + 2 ? s : q;
}

namespace {

std::string join_elems(const nlohmann::json& elems) {
  std::string out;
  for (const auto& e : elems) {
    if (!out.empty()) out += ", ";
    out += value_to_text(e);
  }
  return out;
}

}  // namespace

std::string value_to_text(const nlohmann::json& v) {
  using nlohmann::json;
  switch (v.type()) {
    case json::value_t::null:
      return "nil";
    case json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return v.dump();
    case json::value_t::string:
      return quote_go_string(v.get<std::string>());
    case json::value_t::array:
      return "[" + join_elems(v) + "]";
    case json::value_t::object:
      break;
    default:
      return v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  if (v.value("unreadable", false) && v.contains("len"))  // a string whose bytes were not read
    return fmt::format("<not captured (len {})>", v["len"].dump());
  if (v.contains("str") && v.contains("len")) {  // a truncated string
    std::string s = quote_go_string(v["str"].get<std::string>());
    if (v.value("truncated", false)) s += fmt::format("...(len {})", v["len"].dump());
    return s;
  }
  if (v.value("location", "") == "unknown") return "<location unknown>";
  // Untyped words that turned out to be an interface (a stripped binary's ArgInfo words, its
  // dynamic type found in the runtime's type descriptors): shown as the interface.
  if (v.contains("raw") && v.contains("type") && v.contains("value"))
    return v["type"].get<std::string>() + "(" + value_to_text(v["value"]) + ")";
  if (v.contains("raw")) {
    // Nothing captured: e.g. a float register, which a BPF program cannot read.
    if (v["raw"].empty()) return "<not captured>";
    return "raw" + value_to_text(v["raw"]);
  }
  if (v.contains("type") && v.contains("value") && v.size() == 2)  // interface
    return v["type"].get<std::string>() + "(" + value_to_text(v["value"]) + ")";
  if (v.contains("elems") && v.contains("len")) {  // slice
    std::string s = "[" + join_elems(v["elems"]);
    if (v.value("truncated", false))
      s += fmt::format("{}...+{}", v["elems"].empty() ? "" : ", ",
                       v["len"].get<int64_t>() - int64_t(v["elems"].size()));
    return s + "]";
  }
  if (v.contains("entries") && v.contains("len")) {  // map
    std::string s = "map[";
    bool first = true;
    for (const auto& kv : v["entries"]) {
      if (!first) s += ", ";
      first = false;
      if (kv.is_array() && kv.size() == 2) s += value_to_text(kv[0]) + ":" + value_to_text(kv[1]);
    }
    if (v["len"].is_number() && v["len"].get<size_t>() > v["entries"].size()) s += ", ...";
    return s + "]";
  }
  if (v.contains("addr") && v.contains("func")) return v["func"].get<std::string>();
  if (v.contains("addr") && v.contains("cap") && v.contains("len"))
    return fmt::format("chan({}, len {}, cap {})", v["addr"].get<std::string>(), v["len"].dump(),
                       v["cap"].dump());
  if (v.contains("addr") && v.size() <= 2) {  // pointer
    if (v.contains("elem")) return "&" + value_to_text(v["elem"]);
    return "(*)" + v["addr"].get<std::string>();
  }
  if (v.contains("real") && v.contains("imag") && v.size() == 2)
    return "(" + v["real"].dump() + (v["imag"].get<double>() < 0 ? "" : "+") + v["imag"].dump() +
           "i)";
  std::string s = "{";  // struct
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) s += ", ";
    first = false;
    s += it.key() + ":" + value_to_text(it.value());
  }
  return s + "}";
}

std::string format_duration(uint64_t ns) {
  if (ns < 10'000) return fmt::format("{} ns", ns);
  if (ns < 10'000'000) return fmt::format("{:.3f} us", ns / 1e3);
  if (ns < 10'000'000'000ull) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

}  // namespace gotap
