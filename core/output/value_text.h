// Renders a decoded Go value (the JSON shape of docs/json.md's Values table) in Go-like text
// for humans: "x" strings with control bytes escaped, nil, &{...}, []int{1 2}, map[k:v].
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gotap {

std::string value_to_text(const nlohmann::json& v);
// A Go-quoted string: printable ASCII as is, \n \t \" \\, everything else \xNN or \uNNNN, so
// a tracee's bytes can never reach the terminal as control sequences.
std::string quote_go_string(const std::string& s);
// s itself when every byte is printable ASCII, else its quoted form.
std::string printable(const std::string& s);
// A duration with a unit that keeps 4 to 7 significant digits: "812 ns", "12.345 us".
std::string format_duration(uint64_t ns);

}  // namespace gotap
