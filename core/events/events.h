// Collection is separate from presentation: backends emit events (JSON objects shaped as in
// docs/json.md) to an EventSink; writers (core/output/) render them.
#pragma once

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

}  // namespace gotap
