// Go's quoting, for everything the traced program, its binary or a record puts in text
// output: a string value is printed as Go's %q prints it (strconv.Quote), a name (function,
// parameter, field, type, file) as it is when that quoting would only add the quotes, else
// quoted. Either way no byte reaches the terminal as a control sequence, a bidi override or
// invalid UTF-8 (docs/cli.md, "Quoting").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gotap {

// Go's strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space
// (Unicode tables of Go 1.24, core/model/go_isprint_tables.inc).
bool go_is_print(uint32_t r);
// `s` as Go's strconv.Quote writes it, appended to `out`: printable runes as they are, \a \b
// \f \n \r \t \v \" \\, other runes \xNN (below U+0020 and U+007F), \uNNNN or \UNNNNNNNN,
// each byte of invalid UTF-8 \xNN.
void append_quoted(std::string& out, std::string_view s);
// append_quoted(s) in a string of its own.
std::string quote_go_string(std::string_view s);
// A name: `s` itself when Go's quoting would only add the quotes (every rune printable, no
// '"' or '\\'), else quote_go_string(s).
std::string printable(std::string_view s);
// printable(s), appended to `out`.
void append_printable(std::string& out, std::string_view s);
// A message (an error, a warning) that may hold names: each rune Go's quoting would escape,
// but '"' and '\\', escaped as it does, the rest as it is, without quotes around it.
std::string printable_text(std::string_view s);

}  // namespace gotap
