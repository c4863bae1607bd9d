// libFuzzer target: the text view and the event-size cap on arbitrary JSON, as `gotap
// report` feeds them a record's lines (a record is a file anyone may hand it). Neither may
// throw or crash on any shape.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/output/line_cap.h"
#include "core/output/record.h"
#include "core/output/value_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
