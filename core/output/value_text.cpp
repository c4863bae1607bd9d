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

// Every renderer appends to one string: a value nested N deep is written once, not copied
// once per level into its parent's string (which made a 4,000-deep list's 127 KB take
// seconds and gigabytes, issue 35). `d` is the JSON nesting, bounded by kMaxValueNesting.
void put(std::string& out, const json& v, int d);

// A value's JSON, for shapes this gotap does not know: every byte past ASCII escaped, invalid
// UTF-8 replaced, so the JSON cannot carry a control sequence or a bidi override either; "..."
// when it nests past the bound (the serializer recurses).
std::string json_text(const json& v, int d) {
  if (nests_deeper_than(v, kMaxValueNesting - d)) return "...";
  return v.dump(-1, ' ', true, json::error_handler_t::replace);
}

void put_elems(std::string& out, const json& elems, int d) {
  if (!elems.is_array()) return;
  bool first = true;
  for (const auto& e : elems) {
    if (!first) out += ", ";
    first = false;
    put(out, e, d + 1);
  }
}

// A string gotap wrote (a time, a duration, an address) or a name (a field's, a type's, a
// func value's): from a record it may hold anything, so it is shown as a name is.
std::string str_of(const json& v) {
  return v.is_string() ? printable(v.get_ref<const std::string&>()) : json_text(v, 0);
}

void put_str_of(std::string& out, const json& v) {
  if (v.is_string())
    append_printable(out, v.get_ref<const std::string&>());
  else
    out += json_text(v, 0);
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
void put_more(std::string& out, size_t shown, int64_t len) {
  int64_t rest = len - static_cast<int64_t>(shown);
  if (rest <= 0) return;
  fmt::format_to(std::back_inserter(out), "{}...+{}", shown ? ", " : "", rest);
}

// Bytes as Go's %q when they are printable text, else as hex (Go's %x with 0x in front).
void put_bytes(std::string& out, const json& v) {
  std::string hex = raw_of(v["bytes"]), raw;
  auto nib = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      out += "bytes(";
      append_quoted(out, hex);
      out += ")";
      return;
    }
    raw.push_back(static_cast<char>(hi << 4 | lo));
  }
  int64_t len = v.contains("len") ? int_of(v["len"]) : int64_t(raw.size());
  if (is_true(v, "unreadable")) {
    fmt::format_to(std::back_inserter(out), "<not captured (len {})>", len);
    return;
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
  if (raw.empty())
    out += "\"\"";
  else if (printable)
    out += q;
  else
    out += "0x" + hex;
  if (len > static_cast<int64_t>(raw.size()))
    fmt::format_to(std::back_inserter(out), "...+{}", len - int64_t(raw.size()));
}

void put_struct(std::string& out, const json& fields, bool cut, int d) {
  out += "{";
  bool first = true;
  for (const auto& f : fields) {
    if (!first) out += ", ";
    first = false;
    if (f.is_object() && f.contains("name")) {
      put_str_of(out, f["name"]);
      out += ":";
      // By reference: json::value() returns a copy, and a copy of the subtree at each level
      // of a deep value is memory and time in the square of its depth.
      auto it = f.find("value");
      if (it == f.end())
        out += "nil";
      else
        put(out, *it, d + 1);
    } else {
      put(out, f, d + 1);
    }
  }
  if (cut) out += first ? "..." : ", ...";  // fields left out by --max-line
  out += "}";
}

void put_object(std::string& out, const json& v, int d) {
  // gotap's own objects, told apart by their marks: no Go name is ever a key here (a
  // struct's fields are in "fields"), so a mark cannot be a field. Every accessor checks
  // the JSON type: a record may hold anything.
  //
  // A value left out by the cap on one event's size (--max-line, line_cap.h).
  if (v.size() == 1 && is_true(v, "truncated")) {
    out += "...";
    return;
  }
  if (v.contains("time")) {
    put_str_of(out, v["time"]);
    if (is_true(v, "time_location_unread")) out += " (location not read)";
    return;
  }
  if (v.contains("duration")) return put_str_of(out, v["duration"]);
  if (v.contains("fields")) return put_struct(out, v["fields"], is_true(v, "truncated"), d);
  if (v.contains("bytes")) return put_bytes(out, v);
  if (v.contains("str")) {  // a string cut short or not read
    if (is_true(v, "unreadable")) {
      fmt::format_to(std::back_inserter(out), "<not captured (len {})>",
                     str_of(v.value("len", json())));
      return;
    }
    append_quoted(out, raw_of(v["str"]));
    if (is_true(v, "truncated"))
      fmt::format_to(std::back_inserter(out), "...(len {})", str_of(v.value("len", json())));
    return;
  }
  if (v.contains("location") && v["location"] == "unknown") {
    out += "<location unknown>";
    return;
  }
  // Untyped words that turned out to be an interface (a stripped binary's ArgInfo words, its
  // dynamic type found in the runtime's type descriptors): shown as the interface.
  if (v.contains("type") && v.contains("value")) {
    put_str_of(out, v["type"]);
    out += "(";
    put(out, v["value"], d + 1);
    out += ")";
    return;
  }
  if (v.contains("raw")) {
    // Nothing captured: e.g. a float register, which a BPF program cannot read.
    if (v["raw"].empty()) {
      out += "<not captured>";
      return;
    }
    out += "raw";
    put(out, v["raw"], d + 1);
    return;
  }
  if (v.contains("type")) {
    put_str_of(out, v["type"]);
    out += "(?)";
    return;
  }
  if (v.contains("elems")) {  // slice, or an array cut short
    int64_t len = v.contains("len") ? int_of(v["len"]) : int64_t(v["elems"].size());
    out += "[";
    put_elems(out, v["elems"], d);
    put_more(out, v["elems"].is_array() ? v["elems"].size() : 0, len);
    out += "]";
    return;
  }
  if (v.contains("entries")) {  // map
    out += "map[";
    size_t shown = 0;
    if (v["entries"].is_array())
      for (const auto& kv : v["entries"]) {
        if (shown++) out += ", ";
        if (kv.is_array() && kv.size() == 2) {
          put(out, kv[0], d + 1);
          out += ":";
          put(out, kv[1], d + 1);
        } else {
          put(out, kv, d + 1);
        }
      }
    if (v.contains("len")) put_more(out, shown, int_of(v["len"]));
    out += "]";
    return;
  }
  if (v.contains("func")) return put_str_of(out, v["func"]);
  if (v.contains("addr") && v.contains("cap")) {
    fmt::format_to(std::back_inserter(out), "chan({}, len {}, cap {})", str_of(v["addr"]),
                   str_of(v.value("len", json())), str_of(v["cap"]));
    return;
  }
  if (v.contains("elem")) {
    out += "&";
    put(out, v["elem"], d + 1);
    return;
  }
  if (v.contains("addr")) {
    if (is_true(v, "unreadable")) {
      out += "<unreadable at ";
      put_str_of(out, v["addr"]);
      out += ">";
      return;
    }
    out += "(*)";
    put_str_of(out, v["addr"]);
    if (is_true(v, "truncated")) out += "...";  // its pointee left out by a budget
    return;
  }
  if (v.contains("real") && v.contains("imag")) {
    bool neg = v["imag"].is_number() && v["imag"].get<double>() < 0;
    out += "(" + json_text(v["real"], d) + (neg ? "" : "+") + json_text(v["imag"], d) + "i)";
    return;
  }
  if (is_true(v, "unreadable")) {
    out += "<unreadable>";
    return;
  }
  // A shape this gotap does not know (a newer record?): shown as JSON, never an error.
  out += json_text(v, d);
}

void put(std::string& out, const json& v, int d) {
  if (d > kMaxValueNesting) {
    out += "...";
    return;
  }
  switch (v.type()) {
    case json::value_t::null:
      out += "nil";
      return;
    case json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      out += v.dump();
      return;
    case json::value_t::string:
      append_quoted(out, v.get_ref<const std::string&>());
      return;
    case json::value_t::array:
      out += "[";
      put_elems(out, v, d);
      out += "]";
      return;
    case json::value_t::object:
      return put_object(out, v, d);
    default:
      out += json_text(v, d);
      return;
  }
}

}  // namespace

std::string value_to_text(const nlohmann::json& v) {
  std::string out;
  append_value_text(out, v);
  return out;
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
    default: {
      // Total: any shape prints something. The accessors above check types, and this is the
      // last line of defence should one be missed: an event line is never lost to a value.
      const size_t at = out.size();
      try {
        put(out, v, 0);
      } catch (const std::exception&) {
        out.resize(at);
        out += json_text(v, 0);
      }
      return;
    }
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
