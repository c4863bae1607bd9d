// Recorded traces (`--record FILE`, read by `gotap report`): JSON Lines, one event a line as
// --json prints them, after a header line that names the format and its version, so a
// newer gotap can tell what it reads:
//   {"event":"record","format":"gotap-record","version":2,"command":"trace",...}
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "core/events/events.h"
#include "core/model/result.h"

namespace gotap {

// 2: a struct is {"fields":[{"name":..,"value":..},...]} (docs/json.md, Values). Version 1
// mixed field names with gotap's marks, so its values cannot be converted without guessing.
constexpr int kRecordVersion = 2;

// Writes the header (with `info`'s fields added), then every event.
std::unique_ptr<EventSink> make_record_writer(std::FILE* out, const Event& info);

// Feeds every event of a recorded file to `sink`, then flushes it. Bad input: not a record,
// a version this gotap does not know, or a line that is not JSON (named by number).
Result<void> replay_record(const std::string& path, EventSink& sink);
// Reads only the header line (what the record was made with), for choosing the view.
Result<Event> read_record_header(const std::string& path);

}  // namespace gotap
