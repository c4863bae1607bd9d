// Collection is separate from presentation: backends emit events (JSON objects shaped as in
// docs/json.md) to an EventSink; writers (core/output/) render them.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace gotap {

using Event = nlohmann::json;

struct CallEntry;
struct CallReturn;
struct CallUnfinished;

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void emit(const Event& ev) = 0;
  // The call events, typed: each is a trace's most frequent event. By default they go to
  // emit(to_event(x)), so a sink that only knows JSON objects sees them as before; the text
  // and JSON Lines writers (and the sinks that pass events through to them) render the line
  // straight from the struct, without building a JSON object per event (issue 22). Either
  // way the line is the same, byte for byte (test_call_lines.cpp).
  virtual void emit_entry(const CallEntry& e);
  virtual void emit_return(const CallReturn& r);
  virtual void emit_unfinished(const CallUnfinished& u);
  virtual void flush() {}
};

}  // namespace gotap
