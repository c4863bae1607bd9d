// Renders a decoded Go value (the JSON shape of docs/json.md's Values table) in Go-like text
// for humans: "x" strings with control bytes escaped, nil, &{...}, []int{1 2}, map[k:v].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gotap {

std::string value_to_text(const nlohmann::json& v);
// Appends value_to_text(v) to `out`, the same bytes: a scalar (nil, bool, number, string) is
// written in place, without a string of its own; a composite value goes through
// value_to_text. The text writer renders every call's values with it (issue 22).
void append_value_text(std::string& out, const nlohmann::json& v);
// A Go-quoted string: printable ASCII as is, \n \t \" \\, everything else \xNN or \uNNNN, so
// a tracee's bytes can never reach the terminal as control sequences.
std::string quote_go_string(const std::string& s);
// quote_go_string(s), appended to `out`.
void append_quoted(std::string& out, std::string_view s);
// s itself when every byte is printable ASCII, else its quoted form.
std::string printable(const std::string& s);
// printable(s), appended to `out`.
void append_printable(std::string& out, const std::string& s);
// A duration with a unit that keeps 4 to 7 significant digits: "812 ns", "12.345 us".
std::string format_duration(uint64_t ns);
// format_duration(ns), appended to `out`.
void append_duration(std::string& out, uint64_t ns);
// `v` in decimal, right-aligned in `width` columns: fmt's "{:>W}" of an integer.
void append_int_right(std::string& out, int64_t v, size_t width);
// The seconds of `ns` with six decimals, right-aligned in 13 columns: the same bytes as
// fmt's "{:>13.6f}" of ns / 1e9, the text writer's TIME column.
void append_seconds(std::string& out, uint64_t ns);

}  // namespace gotap
