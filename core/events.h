// Collection is separate from presentation: backends emit events (JSON objects shaped as in
// docs/json.md) to an EventSink; writers (JSON Lines, text) render them.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace gotap {

using Event = nlohmann::json;

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void emit(const Event& ev) = 0;
  virtual void flush() {}
};

// One JSON object per line.
std::unique_ptr<EventSink> make_json_lines_writer(std::FILE* out);
// Aligned, human-readable lines; strings are escaped so the tracee cannot inject terminal
// control sequences.
std::unique_ptr<EventSink> make_text_writer(std::FILE* out);

}  // namespace gotap
