// The strings the decoders read are the traced program's bytes, invalid UTF-8 included: the
// text view quotes them as Go's %q does (`"\xff"`), which it can only do if it sees them.
// JSON cannot hold such bytes, so every writer of a value's JSON writes each invalid byte as
// the code point of the same number (U+00XX, docs/json.md), through value_json_safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gotap {

// Whether `s` is valid UTF-8 (no overlong form, surrogate or code point past U+10FFFF).
bool valid_utf8(std::string_view s);

// `bytes` with each byte that is not part of valid UTF-8 as U+00XX (two bytes): valid UTF-8,
// and the bytes stay recoverable.
std::string sanitize_utf8(std::string_view bytes);

// Whether the strings of value `v` that hold the program's bytes are all valid UTF-8. A
// value's names (the "name" of a struct field or a parameter, a "type", a "func") are not
// among them: they are written as every name is (U+FFFD for an invalid byte, cli.md).
bool value_json_is_safe(const nlohmann::json& v);

// `v` with sanitize_utf8 applied to those strings. Nearly every value is safe already:
// writers check with value_json_is_safe first and copy only when it says no.
nlohmann::json value_json_safe(const nlohmann::json& v);

}  // namespace gotap
