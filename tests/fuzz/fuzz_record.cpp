// libFuzzer target: `gotap report` on arbitrary bytes, through every view. A record is a file
// anyone may hand it: the reader and the views may refuse it (an error) but never throw,
// crash or overflow the stack, whatever the nesting.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

#include "core/output/output_views.h"
#include "core/output/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::FILE* devnull = std::fopen("/dev/null", "w");
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // The views recurse a level of nesting at a time: within 1 MiB of stack at the record
  // ceiling in gotap's own build, but the sanitizers' frames are many times larger, and
  // this target runs on libFuzzer's 8 MiB main thread. A line deeper than this but within
  // the ceiling is left to the unit tests, which render it on a large stack; deeper than
  // the ceiling is refused before parsing whatever the build, and stays fuzzed.
  if (gotap::json_nests_deeper_than(bytes, 1000) &&
      !gotap::json_nests_deeper_than(bytes, gotap::kMaxRecordNesting))
    return 0;
  // Most inputs are not records: a header is put in front of half of them, so that the
  // fuzzer reaches the events (the first byte chooses).
  const std::string header =
      "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":2,\"command\":\"trace\"}\n";
  const std::string text = size && (data[0] & 1) ? header + bytes.substr(1) : bytes;
  for (const char* format :
       {"text", "json", "latency", "graph", "perfetto", "folded", "svg", "goroutines"}) {
    std::istringstream in(text);
    // The views of a --why record too (the second bit chooses): they read wakers and
    // parking places from the goroutine events.
    auto sink = gotap::make_output(
        format, devnull,
        {.why = size && (data[0] & 2), .all_goroutine_events = !(size && (data[0] & 4))});
    (void)gotap::replay_record("fuzz", in, *sink);
  }
  return 0;
}
