#include "core/model/go_quote.h"

#include <algorithm>
#include <iterator>

namespace gotap {

namespace {

#include "core/model/go_isprint_tables.inc"

// strconv's bsearch: the first index whose entry is >= v.
template <class T, size_t N>
size_t lower(const T (&table)[N], T v) {
  return static_cast<size_t>(std::lower_bound(std::begin(table), std::end(table), v) -
                             std::begin(table));
}

template <class T, size_t N>
bool in_ranges(const T (&table)[N], T v) {
  size_t i = lower(table, v);
  return i < N && table[i & ~size_t{1}] <= v && v <= table[i | 1];
}

template <class T, size_t N>
bool listed(const T (&table)[N], T v) {
  size_t i = lower(table, v);
  return i < N && table[i] == v;
}

constexpr char kHex[] = "0123456789abcdef";

void append_hex(std::string& out, uint32_t v, int digits) {
  for (int s = (digits - 1) * 4; s >= 0; s -= 4) out.push_back(kHex[(v >> s) & 0xF]);
}

// utf8.DecodeRuneInString for a lead byte >= 0x80: the rune and its width, or width 0 where
// Go returns (RuneError, 1): a bad lead, a bad or missing continuation, an overlong form, a
// surrogate or a rune past U+10FFFF.
uint32_t decode(std::string_view s, size_t i, size_t& width) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  width = 0;
  size_t n;
  uint32_t r, lo = 0x80, hi = 0xBF;  // the second byte's range, as Go's acceptRanges
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, r = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, r = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, r = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    r = r << 6 | (b(k) & 0x3F);
  }
  width = n;
  return r;
}

// strconv's appendEscapedRune for a valid rune, quote '"'; `quotes`: '"' and '\\' escaped.
void append_rune(std::string& out, std::string_view bytes, uint32_t r, bool quotes) {
  if (quotes && (r == '"' || r == '\\')) {
    out.push_back('\\');
    out.push_back(static_cast<char>(r));
    return;
  }
  if (go_is_print(r)) {
    out.append(bytes);
    return;
  }
  switch (r) {
    case '\a':
      out += "\\a";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\v':
      out += "\\v";
      return;
    default:
      break;
  }
  if (r < ' ' || r == 0x7F) {
    out += "\\x";
    append_hex(out, r, 2);
  } else if (r < 0x10000) {
    out += "\\u";
    append_hex(out, r, 4);
  } else {
    out += "\\U";
    append_hex(out, r, 8);
  }
}

// Nearly every name and string: printable ASCII without '"' or '\\', which quoting leaves as
// it is (and needs no rune decoding to tell).
bool is_plain(unsigned char c) {
  return c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
}

bool plain_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (!is_plain(c)) return false;
  return true;
}

}  // namespace

bool go_is_print(uint32_t r) {
  if (r <= 0xFF) {
    if (r >= 0x20 && r <= 0x7E) return true;
    if (r >= 0xA1) return r != 0xAD;  // the soft hyphen
    return false;
  }
  if (r < 0x10000) {
    const auto v = static_cast<uint16_t>(r);
    return in_ranges(kIsPrint16, v) && !listed(kIsNotPrint16, v);
  }
  if (!in_ranges(kIsPrint32, r)) return false;
  if (r >= 0x20000) return true;
  return !listed(kIsNotPrint32, static_cast<uint16_t>(r - 0x10000));
}

namespace {

// What strconv.Quote writes between the quotes.
void append_escaped(std::string& out, std::string_view s, bool quotes) {
  for (size_t i = 0; i < s.size();) {
    // A run of printable ASCII, nearly all of every string, appended at once.
    size_t j = i;
    while (j < s.size() && is_plain(static_cast<unsigned char>(s[j]))) ++j;
    out.append(s.data() + i, j - i);
    if ((i = j) == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      append_rune(out, s.substr(i, 1), c, quotes);
      ++i;
      continue;
    }
    size_t width;
    const uint32_t r = decode(s, i, width);
    if (width == 0) {  // invalid UTF-8: the byte itself
      out += "\\x";
      append_hex(out, c, 2);
      ++i;
      continue;
    }
    append_rune(out, s.substr(i, width), r, quotes);
    i += width;
  }
}

}  // namespace

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  append_escaped(out, s, true);
  out.push_back('"');
}

std::string printable_text(std::string_view s) {
  std::string out;
  append_escaped(out, s, false);
  return out;
}

std::string quote_go_string(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

std::string printable(std::string_view s) {
  std::string out;
  append_printable(out, s);
  return out;
}

void append_printable(std::string& out, std::string_view s) {
  if (plain_ascii(s)) {
    out.append(s);
    return;
  }
  const size_t at = out.size();
  append_quoted(out, s);
  // Quoting only added the quotes: every rune is printable, the name is shown as it is.
  if (out.size() - at == s.size() + 2) {
    out.resize(at);
    out.append(s);
  }
}

}  // namespace gotap
