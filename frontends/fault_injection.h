// A test hook: GOTAP_TEST_FAIL_SINK_AT=N makes the output throw at its Nth event, as a
// decoding or output bug would, so that tests can check what a failure after the probes are
// placed leaves behind (nothing: tests/unit/test_runtime_live.cpp).
#pragma once

#include <memory>

#include "core/events/events.h"

namespace gotap::cli {

// `sink` itself unless GOTAP_TEST_FAIL_SINK_AT holds a positive number.
std::unique_ptr<EventSink> maybe_failing_sink(std::unique_ptr<EventSink> sink);

}  // namespace gotap::cli
