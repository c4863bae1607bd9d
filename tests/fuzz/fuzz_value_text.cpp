// libFuzzer target: the text view and the event-size cap on arbitrary JSON, as `gotap
// report` feeds them a record's lines (a record is a file anyone may hand it). Neither may
// throw or crash on any shape.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/output/line_cap.h"
#include "core/output/record.h"
#include "core/output/value_text.h"

// The views recurse a level of nesting at a time: within 1 MiB of stack at the record
// ceiling in gotap's own build, but the sanitizers' frames are many times larger, and this
// target runs on libFuzzer's 8 MiB main thread. Deeper inputs are left to the unit tests,
// which render the ceiling on a large stack (tests/unit/big_stack.h).
constexpr int kFuzzNesting = 1000;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (gotap::json_nests_deeper_than(std::string_view(reinterpret_cast<const char*>(data), size),
                                    kFuzzNesting))
    return 0;
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  std::string s = gotap::value_to_text(j);  // bounded at kMaxValueNesting, whatever the depth
  // The cap recurses: it sees live events, as deep as --max-depth makes them, and no record
  // line nests deeper than kMaxRecordNesting (record.h).
  if (gotap::nests_deeper_than(j, gotap::kMaxRecordNesting)) return 0;
  nlohmann::json ev = {{"event", "entry"},
                       {"args", nlohmann::json::array({{{"name", "a"}, {"value", j}}})}};
  nlohmann::json capped = gotap::cap_event_values(ev, 64);
  s += gotap::value_to_text(capped["args"][0]["value"]);
  volatile size_t sink = s.size();
  (void)sink;
  return 0;
}
