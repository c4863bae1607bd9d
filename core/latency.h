// Latency statistics from a list of call durations, as the `latency` event of CONTRACT.md:
// count, min, max, p50/p90/p99 and log2 buckets. Shared by the ptrace backend (which
// measures in user space) and `gotap report` (which derives it from recorded returns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/events.h"

namespace gotap {

// `durations` is sorted in place. Empty durations give a count of 0 and no buckets.
Event latency_event(const std::string& func, std::vector<uint64_t>& durations);

}  // namespace gotap
