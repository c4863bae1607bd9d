// Renders a decoded Go value (the JSON shape of docs/json.md's Values table) in Go-like text
// for humans: "x" strings with control bytes escaped, nil, &{...}, []int{1 2}, map[k:v].
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/model/go_quote.h"

namespace gotap {

// How deep the text of a value nests, in JSON levels (an array, an object), at most: deeper
// parts print as "...". A record's line may nest no deeper (record.h), so `gotap report`
// renders every value it reads in full. A decoded value nests at most four JSON levels per Go
// level (a pointer's object, a struct's, its fields' array, a field's object), so a value cut
// at the --max-depth ceiling (1000, core/decode/value_decoder.h) fits with room for the event
// around it: a record gotap wrote at any --max-depth reads back whole.
constexpr int kMaxValueNesting = 4 * 1000 + 16;
// Whether `v` holds arrays or objects nested more than `levels` deep (a scalar: 0 levels, [1]
// one); it looks no deeper than that, so it cannot overflow the stack itself.
bool nests_deeper_than(const nlohmann::json& v, int levels);

// Total: any JSON prints something, and no byte of it reaches the terminal raw: strings are
// Go-quoted, names (fields, types) printable() (go_quote.h).
std::string value_to_text(const nlohmann::json& v);
// Appends value_to_text(v) to `out`, the same bytes: a scalar (nil, bool, number, string) is
// written in place, without a string of its own; a composite value goes through
// value_to_text. The text writer renders every call's values with it (issue 22).
void append_value_text(std::string& out, const nlohmann::json& v);
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
