// latency --why on eBPF: the sums the kernel keeps per function and latency bucket
// (bpf/why_agg.h), read at the end of the run and turned into each function's `why` and
// `why_slowest`, the same objects core/why/why_latency.h makes from per-call splits. The
// slowest 1% of the calls is read from the top buckets: the calls of every bucket down to the
// one that reaches 1% (at least one call), so `why_slowest.calls` may be a few more than 1%
// where calls of nearly the same duration share the boundary's bucket (8 per power of two).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/events/events.h"
#include "gotap_shared.h"

namespace gotap {
class Pclntab;
}

namespace gotap::ebpf {

struct WhyBucket {
  gotap_why_parts parts{};
  std::vector<std::pair<gotap_why_wait_key, gotap_why_sum>> waits;
  std::vector<std::pair<uint64_t, gotap_why_sum>> syscalls;  // by number
};
// func_id -> latency bucket -> sums.
using WhySums = std::map<uint32_t, std::map<uint32_t, WhyBucket>>;

// The three maps' entries (false when a map could not be walked).
bool read_why_sums(int parts_fd, int waits_fd, int sys_fd, WhySums& out);

struct WhyNames {
  std::function<std::string(uint64_t)> func_of;  // the function of a run-time pc
  std::vector<std::string> wait_reasons;         // g.waitreason's names (core/model)
  bool preempted_measured = false;               // the scheduler's tracepoint was attached
  bool syscalls_named = false;                   // the system-call tracepoints too
};

// One function's `why` (every call) and `why_slowest` (the top buckets' calls), with shares;
// both null when no call of it was split.
std::pair<Event, Event> why_of(const std::map<uint32_t, WhyBucket>& buckets, const WhyNames& names);

// The text of the functions outside the runtime, sync and internal/ (first_user_frame's
// rule), link-time addresses plus bias, adjacent ones merged, in address order.
std::vector<gotap_why_range> why_keep_ranges(const Pclntab& pcln, uint64_t bias);

}  // namespace gotap::ebpf
