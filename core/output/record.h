// Recorded traces (`--record FILE`, read by `gotap report`): JSON Lines, one event a line as
// --json prints them, after a header line that names the format and its version, so a
// newer gotap can tell what it reads:
//   {"event":"record","format":"gotap-record","version":2,"command":"trace",...}
#pragma once

#include <cstdio>
#include <istream>
#include <memory>
#include <string>
#include <string_view>

#include "core/events/events.h"
#include "core/model/result.h"
#include "core/output/value_text.h"

namespace gotap {

// 2: a struct is {"fields":[{"name":..,"value":..},...]} (docs/json.md, Values). Version 1
// mixed field names with gotap's marks, so its values cannot be converted without guessing.
constexpr int kRecordVersion = 2;

// How deep a record's line may nest its arrays and objects: deeper is refused before it is
// parsed, as every view renders values recursively. A line gotap writes nests a value's
// levels plus three (event, args, the argument), each Go level of a value up to four: no
// more than this at the --max-depth ceiling (value_text.h).
constexpr int kMaxRecordNesting = kMaxValueNesting;

// Whether the JSON text `s` nests arrays and objects more than `levels` deep ("[1]" one), told
// by counting brackets outside strings: no recursion, whatever the input.
bool json_nests_deeper_than(std::string_view s, int levels);

// Writes the header (with `info`'s fields added), then every event.
std::unique_ptr<EventSink> make_record_writer(std::FILE* out, const Event& info);

// Feeds every event of a recorded file to `sink`, then flushes it. Bad input: not a record,
// a version this gotap does not know, a line that is not JSON, nests deeper than
// kMaxRecordNesting or has a field of the wrong type (named by number).
Result<void> replay_record(const std::string& path, EventSink& sink);
// The same, from a stream (the fuzz target's input); `path` names it in errors.
Result<void> replay_record(const std::string& path, std::istream& in, EventSink& sink);
// Reads only the header line (what the record was made with), for choosing the view.
Result<Event> read_record_header(const std::string& path);

}  // namespace gotap
