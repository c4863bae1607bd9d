#include "core/output/value_text.h"

#include <array>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace gotap {

bool nests_deeper_than(const nlohmann::json& v, int levels) {
  if (!v.is_array() && !v.is_object()) return levels < 0;
  if (levels < 1) return true;
  for (const auto& e : v)
    if (nests_deeper_than(e, levels - 1)) return true;
  return false;
}

namespace {

using nlohmann::json;

std::string text(const json& v, int d);

// A value's JSON, for shapes this gotap does not know: every byte past ASCII escaped, invalid
// UTF-8 replaced, so the JSON cannot carry a control sequence or a bidi override either; "..."
// when it nests past the bound (the serializer recurses).
std::string json_text(const json& v, int d) {
  if (nests_deeper_than(v, kMaxValueNesting - d)) return "...";
  return v.dump(-1, ' ', true, json::error_handler_t::replace);
}

std::string join_elems(const json& elems, int d) {
  std::string out;
  if (!elems.is_array()) return out;
  for (const auto& e : elems) {
    if (!out.empty()) out += ", ";
    out += text(e, d + 1);
  }
  return out;
}

// A string gotap wrote (a time, a duration, an address) or a name (a field's, a type's, a
// func value's): from a record it may hold anything, so it is shown as a name is.
std::string str_of(const json& v) {
  return v.is_string() ? printable(v.get_ref<const std::string&>()) : json_text(v, 0);
}

// A string's own bytes, to be quoted or decoded.
std::string raw_of(const json& v) {
  return v.is_string() ? v.get<std::string>() : json_text(v, 0);
}

int64_t int_of(const json& v) {
  return v.is_number_integer() ? v.get<int64_t>() : v.is_number() ? int64_t(v.get<double>()) : 0;
}

bool is_true(const json& v, const char* key) {
  auto it = v.find(key);
  return it != v.end() && it->is_boolean() && it->get<bool>();
}

// ", ...+N" after what was shown of N more elements.
std::string more(size_t shown, int64_t len) {
  int64_t rest = len - static_cast<int64_t>(shown);
  if (rest <= 0) return "";
  return fmt::format("{}...+{}", shown ? ", " : "", rest);
}

// Bytes as Go's %q when they are printable text, else as hex (Go's %x with 0x in front).
std::string bytes_text(const json& v) {
  std::string hex = raw_of(v["bytes"]), raw;
  auto nib = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return "bytes(" + quote_go_string(hex) + ")";
    raw.push_back(static_cast<char>(hi << 4 | lo));
  }
  std::string q = quote_go_string(raw);
  // Printable: nothing had to be escaped but \n, \r, \t, \" and \\ (text's own escapes).
  bool printable = true;
  for (size_t i = 0; i + 1 < q.size(); ++i)
    if (q[i] == '\\') {
      const char e = q[i + 1];
      if (e != 'n' && e != 'r' && e != 't' && e != '"' && e != '\\') printable = false;
      ++i;
    }
  std::string s = raw.empty() ? "\"\"" : printable ? q : "0x" + hex;
  int64_t len = v.contains("len") ? int_of(v["len"]) : int64_t(raw.size());
  if (is_true(v, "unreadable")) return fmt::format("<not captured (len {})>", len);
  if (len > static_cast<int64_t>(raw.size())) s += fmt::format("...+{}", len - int64_t(raw.size()));
  return s;
}

std::string struct_text(const json& fields, bool cut, int d) {
  std::string s = "{";
  bool first = true;
  for (const auto& f : fields) {
    if (!first) s += ", ";
    first = false;
    if (f.is_object() && f.contains("name"))
      s += str_of(f["name"]) + ":" + text(f.value("value", json()), d + 1);
    else
      s += text(f, d + 1);
  }
  if (cut) s += first ? "..." : ", ...";  // fields left out by --max-line
  return s + "}";
}

std::string object_text(const json& v, int d) {
  // gotap's own objects, told apart by their marks: no Go name is ever a key here (a
  // struct's fields are in "fields"), so a mark cannot be a field. Every accessor checks
  // the JSON type: a record may hold anything.
  //
  // A value left out by the cap on one event's size (--max-line, line_cap.h).
  if (v.size() == 1 && is_true(v, "truncated")) return "...";
  if (v.contains("time")) {
    std::string s = str_of(v["time"]);
    if (is_true(v, "time_location_unread")) s += " (location not read)";
    return s;
  }
  if (v.contains("duration")) return str_of(v["duration"]);
  if (v.contains("fields")) return struct_text(v["fields"], is_true(v, "truncated"), d);
  if (v.contains("bytes")) return bytes_text(v);
  if (v.contains("str")) {  // a string cut short or not read
    if (is_true(v, "unreadable"))
      return fmt::format("<not captured (len {})>", str_of(v.value("len", json())));
    std::string s = quote_go_string(raw_of(v["str"]));
    if (is_true(v, "truncated")) s += fmt::format("...(len {})", str_of(v.value("len", json())));
    return s;
  }
  if (v.contains("location") && v["location"] == "unknown") return "<location unknown>";
  // Untyped words that turned out to be an interface (a stripped binary's ArgInfo words, its
  // dynamic type found in the runtime's type descriptors): shown as the interface.
  if (v.contains("type") && v.contains("value"))
    return str_of(v["type"]) + "(" + text(v["value"], d + 1) + ")";
  if (v.contains("raw")) {
    // Nothing captured: e.g. a float register, which a BPF program cannot read.
    if (v["raw"].empty()) return "<not captured>";
    return "raw" + text(v["raw"], d + 1);
  }
  if (v.contains("type")) return str_of(v["type"]) + "(?)";
  if (v.contains("elems")) {  // slice, or an array cut short
    int64_t len = v.contains("len") ? int_of(v["len"]) : int64_t(v["elems"].size());
    return "[" + join_elems(v["elems"], d) +
           more(v["elems"].is_array() ? v["elems"].size() : 0, len) + "]";
  }
  if (v.contains("entries")) {  // map
    std::string s = "map[";
    size_t shown = 0;
    if (v["entries"].is_array())
      for (const auto& kv : v["entries"]) {
        if (shown++) s += ", ";
        if (kv.is_array() && kv.size() == 2)
          s += text(kv[0], d + 1) + ":" + text(kv[1], d + 1);
        else
          s += text(kv, d + 1);
      }
    if (v.contains("len")) s += more(shown, int_of(v["len"]));
    return s + "]";
  }
  if (v.contains("func")) return str_of(v["func"]);
  if (v.contains("addr") && v.contains("cap"))
    return fmt::format("chan({}, len {}, cap {})", str_of(v["addr"]),
                       str_of(v.value("len", json())), str_of(v["cap"]));
  if (v.contains("elem")) return "&" + text(v["elem"], d + 1);
  if (v.contains("addr")) {
    if (is_true(v, "unreadable")) return "<unreadable at " + str_of(v["addr"]) + ">";
    return "(*)" + str_of(v["addr"]);
  }
  if (v.contains("real") && v.contains("imag")) {
    bool neg = v["imag"].is_number() && v["imag"].get<double>() < 0;
    return "(" + json_text(v["real"], d) + (neg ? "" : "+") + json_text(v["imag"], d) + "i)";
  }
  if (is_true(v, "unreadable")) return "<unreadable>";
  // A shape this gotap does not know (a newer record?): shown as JSON, never an error.
  return json_text(v, d);
}

std::string text(const json& v, int d) {
  if (d > kMaxValueNesting) return "...";
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
      return "[" + join_elems(v, d) + "]";
    case json::value_t::object:
      return object_text(v, d);
    default:
      return json_text(v, d);
  }
}

}  // namespace

std::string value_to_text(const nlohmann::json& v) {
  // Total: any shape prints something. The accessors above check types, and this is the
  // last line of defence should one be missed: an event line is never lost to a value.
  try {
    return text(v, 0);
  } catch (const std::exception&) {
    return json_text(v, 0);
  }
}

std::string format_duration(uint64_t ns) {
  if (ns < 10'000) return fmt::format("{} ns", ns);
  if (ns < 10'000'000) return fmt::format("{:.3f} us", ns / 1e3);
  if (ns < 10'000'000'000ull) return fmt::format("{:.3f} ms", ns / 1e6);
  return fmt::format("{:.3f} s", ns / 1e9);
}

}  // namespace gotap

namespace gotap {

void append_value_text(std::string& out, const nlohmann::json& v) {
  // The same bytes as text(v): a number as the JSON serializer writes it (dump()), a string
  // quoted. Nothing here can throw.
  switch (v.type()) {
    case json::value_t::null:
      out += "nil";
      return;
    case json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer: {
      fmt::format_int f(v.get<int64_t>());
      out.append(f.data(), f.size());
      return;
    }
    case json::value_t::number_unsigned: {
      fmt::format_int f(v.get<uint64_t>());
      out.append(f.data(), f.size());
      return;
    }
    case json::value_t::number_float: {
      // The serializer's dump_float: not finite is null, else the shortest round trip.
      const double x = v.get<double>();
      if (!std::isfinite(x)) {
        out += "null";
        return;
      }
      std::array<char, 64> buf;
      char* end = nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), x);
      out.append(buf.data(), static_cast<size_t>(end - buf.data()));
      return;
    }
    case json::value_t::string:
      append_quoted(out, v.get_ref<const std::string&>());
      return;
    default:
      out += value_to_text(v);
      return;
  }
}

namespace {

void append_uint(std::string& out, uint64_t v) {
  fmt::format_int f(v);
  out.append(f.data(), f.size());
}

// `units` / 1000 with three decimals: "12.345".
void append_milli(std::string& out, uint64_t units) {
  append_uint(out, units / 1000);
  const auto r = static_cast<unsigned>(units % 1000);
  out += '.';
  out += static_cast<char>('0' + r / 100);
  out += static_cast<char>('0' + r / 10 % 10);
  out += static_cast<char>('0' + r % 10);
}

// Where integer rounding of ns to `unit` gives the digits fmt gives for the double ns / 1e9
// (or 1e6): ns exact in a double, the double's error far below a nanosecond, and not half
// way between two units, where the double's own rounding decides.
bool rounds_as_double(uint64_t ns, uint64_t unit) {
  return ns < 1'000'000'000'000'000ull && ns % unit != unit / 2;
}

}  // namespace

void append_duration(std::string& out, uint64_t ns) {
  if (ns < 10'000) {
    append_uint(out, ns);
    out += " ns";
  } else if (ns < 10'000'000) {
    append_milli(out, ns);  // ns / 1e3 to three decimals is ns's own digits
    out += " us";
  } else if (ns < 10'000'000'000ull && rounds_as_double(ns, 1000)) {
    append_milli(out, (ns + 500) / 1000);
    out += " ms";
  } else if (ns >= 10'000'000'000ull && rounds_as_double(ns, 1'000'000)) {
    append_milli(out, (ns + 500'000) / 1'000'000);
    out += " s";
  } else {
    out += format_duration(ns);
  }
}

void append_int_right(std::string& out, int64_t v, size_t width) {
  fmt::format_int f(v);
  if (f.size() < width) out.append(width - f.size(), ' ');
  out.append(f.data(), f.size());
}

void append_seconds(std::string& out, uint64_t ns) {
  if (!rounds_as_double(ns, 1000)) {
    fmt::format_to(std::back_inserter(out), "{:>13.6f}", ns / 1e9);
    return;
  }
  // Written right to left into one buffer, appended at once.
  uint64_t us = (ns + 500) / 1000;
  char buf[32];
  char* const end = buf + sizeof buf;
  char* p = end;
  for (int i = 0; i < 6; ++i, us /= 10) *--p = static_cast<char>('0' + us % 10);
  *--p = '.';
  do {
    *--p = static_cast<char>('0' + us % 10);
    us /= 10;
  } while (us);
  while (end - p < 13) *--p = ' ';
  out.append(p, static_cast<size_t>(end - p));
}

}  // namespace gotap
