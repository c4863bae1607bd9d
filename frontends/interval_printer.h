// `count -i SECONDS` / `latency -i SECONDS`: every interval, the calls of that interval alone
// (bcc's funccount -i, funclatency -i). Each print is a read of the backend's live counters
// (the same read a --prometheus scrape makes) minus the previous read: no reset of the
// kernel's maps, so no increment in flight between a read and a reset is lost.
#pragma once

#include <memory>

#include "core/events/events.h"
#include "core/events/live_metrics.h"

namespace gotap::cli {

// A sink that passes every event on under one mutex (the backend's thread and the interval
// timer both write) and, every `seconds`, emits the interval's `count` or `latency` events
// with "interval", "start_ts_ns" and "end_ts_ns". The first count, latency or summary event of
// the backend (the end of the run) first gets the last, partial interval. `metrics` must be
// given to the backend as TraceOptions::metrics.
std::unique_ptr<EventSink> make_interval_printer(std::unique_ptr<EventSink> next,
                                                 LiveMetrics& metrics, double seconds,
                                                 bool latency);

}  // namespace gotap::cli
