#include "core/model/json_utf8.h"

#include <cstdint>

namespace gotap {

namespace {

// The width of the valid UTF-8 sequence at s[i], a byte >= 0x80; 0 when it is not one.
size_t sequence(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Overlong forms, surrogates and out-of-range code points are invalid too.
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

// The members of a value's objects that hold a name, not the program's bytes.
bool is_name(const std::string& key) {
  return key == "name" || key == "type" || key == "func";
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = sequence(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (const size_t len = sequence(s, i)) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    ++i;
  }
  return out;
}

bool value_json_is_safe(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string:
      return valid_utf8(v.get_ref<const std::string&>());
    case nlohmann::json::value_t::array:
      for (const auto& e : v)
        if (!value_json_is_safe(e)) return false;
      return true;
    case nlohmann::json::value_t::object:
      for (auto it = v.begin(); it != v.end(); ++it)
        if (!is_name(it.key()) && !value_json_is_safe(it.value())) return false;
      return true;
    default:
      return true;
  }
}

nlohmann::json value_json_safe(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::string:
      return sanitize_utf8(v.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      auto out = nlohmann::json::array();
      for (const auto& e : v) out.push_back(value_json_safe(e));
      return out;
    }
    case nlohmann::json::value_t::object: {
      auto out = nlohmann::json::object();
      for (auto it = v.begin(); it != v.end(); ++it)
        out[it.key()] = is_name(it.key()) ? it.value() : value_json_safe(it.value());
      return out;
    }
    default:
      return v;
  }
}

}  // namespace gotap
