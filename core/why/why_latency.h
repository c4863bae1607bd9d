// latency --why: the backend runs in trace mode with the why sink (why_sink.h) in front, and
// this sink turns its returns into each function's `latency` event, with `why` (the totals of
// its calls' splits) and `why_slowest` (the same over the slowest 1% of them), before the
// summary. Entries and returns go no further. (On eBPF the calls still cross the ring buffer:
// aggregating in the kernel is later work, docs/cli.md.)
#pragma once

#include <cstddef>
#include <memory>

#include "core/events/events.h"

namespace gotap::why {

// Adds one call's `why` into `total` (a why object, or null to start): parts add up (a part
// null in either stays null), waits merge by reason, place and waker, the waker without its
// goid (each call's may differ).
void add_why(Event& total, const Event& why);

// Adds to a total of add_why `shares`, each part's fraction of the parts' sum ({"running":
// 0.12,...}, null for a null part), and `share` to each wait: the same for that wait.
void add_shares(Event& total);

// keep: the calls per function whose split is kept for why_slowest; calls past it still count
// in the totals, and the slowest are chosen among the kept ones (the summary says how many
// were not kept).
std::unique_ptr<EventSink> make_why_latency_sink(std::unique_ptr<EventSink> next,
                                                 size_t keep = 100'000);

}  // namespace gotap::why
