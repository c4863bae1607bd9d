#include "core/output/value_text.h"

#include <array>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace gotap {

namespace {

// c's low `digits` hex digits (lower case), or more when c needs them: fmt's "{:0Nx}".
void append_hex(std::string& out, uint32_t c, int digits) {
  char buf[8];
  int n = 0;
  do {
    buf[n++] = "0123456789abcdef"[c & 0xF];
    c >>= 4;
  } while (c || n < digits);
  while (n) out.push_back(buf[--n]);
}

}  // namespace

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
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
      out += "\\u";
      append_hex(out, cp, 4);
      i += len - 1;
    } else {
      out += "\\x";
      append_hex(out, c, 2);
    }
  }
  out.push_back('"');
}

std::string quote_go_string(const std::string& s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

std::string printable(const std::string& s) {
  // Nearly every name is plain printable ASCII: returned as it is, without quoting it first
  // to find out (a string built per name, on every call line).
  bool plain = true;
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  if (plain) return s;
  std::string q = quote_go_string(s);
  return q.size() == s.size() + 2 ? s : q;
}

namespace {

bool plain_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  return true;
}

}  // namespace

void append_printable(std::string& out, const std::string& s) {
  if (plain_ascii(s)) {
    out += s;
    return;
  }
  // As printable(): the quoted form, unless quoting only added the quotes.
  const size_t at = out.size();
  append_quoted(out, s);
  if (out.size() - at == s.size() + 2) {
    out.resize(at);
    out += s;
  }
}

namespace {

using nlohmann::json;

// Every renderer appends to one string: a value nested N deep is written once, not copied
// once per level into its parent's string (which made a 4,000-deep list's 127 KB take
// seconds and gigabytes, issue 35).
void put(std::string& out, const json& v);

void put_elems(std::string& out, const json& elems) {
  if (!elems.is_array()) return;
  bool first = true;
  for (const auto& e : elems) {
    if (!first) out += ", ";
    first = false;
    put(out, e);
  }
}

void put_str_of(std::string& out, const json& v) {
  if (v.is_string())
    out += v.get_ref<const std::string&>();
  else
    out += v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string str_of(const json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, json::error_handler_t::replace);
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
  std::string hex = str_of(v["bytes"]), raw;
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
  // Printable: nothing had to be escaped as \xNN or \uNNNN (\n, \t, \" are text).
  bool printable = true;
  for (size_t i = 0; i + 1 < q.size(); ++i)
    if (q[i] == '\\') {
      if (q[i + 1] == 'x' || q[i + 1] == 'u') printable = false;
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

void put_struct(std::string& out, const json& fields, bool cut) {
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
        put(out, *it);
    } else {
      put(out, f);
    }
  }
  if (cut) out += first ? "..." : ", ...";  // fields left out by --max-line
  out += "}";
}

void put_object(std::string& out, const json& v) {
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
  if (v.contains("fields")) return put_struct(out, v["fields"], is_true(v, "truncated"));
  if (v.contains("bytes")) return put_bytes(out, v);
  if (v.contains("str")) {  // a string cut short or not read
    if (is_true(v, "unreadable")) {
      fmt::format_to(std::back_inserter(out), "<not captured (len {})>",
                     str_of(v.value("len", json())));
      return;
    }
    append_quoted(out, str_of(v["str"]));
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
    put(out, v["value"]);
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
    put(out, v["raw"]);
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
    put_elems(out, v["elems"]);
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
          put(out, kv[0]);
          out += ":";
          put(out, kv[1]);
        } else {
          put(out, kv);
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
    put(out, v["elem"]);
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
    return;
  }
  if (v.contains("real") && v.contains("imag")) {
    bool neg = v["imag"].is_number() && v["imag"].get<double>() < 0;
    out += "(" + v["real"].dump() + (neg ? "" : "+") + v["imag"].dump() + "i)";
    return;
  }
  if (is_true(v, "unreadable")) {
    out += "<unreadable>";
    return;
  }
  // A shape this gotap does not know (a newer record?): shown as JSON, never an error.
  out += v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void put(std::string& out, const json& v) {
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
      put_elems(out, v);
      out += "]";
      return;
    case json::value_t::object:
      return put_object(out, v);
    default:
      out += v.dump(-1, ' ', false, json::error_handler_t::replace);
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
        put(out, v);
      } catch (const std::exception&) {
        out.resize(at);
        out += v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
