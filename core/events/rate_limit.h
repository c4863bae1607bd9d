// --rate N in user space (the ptrace backend; the eBPF one does the same in the kernel,
// bpf/call_limits.h): per function, at most N reported calls in any window of one second of
// CLOCK_MONOTONIC, the clock of every ts_ns (bpf/rate_window.h says how and what it costs).
#pragma once

#include <cstdint>
#include <vector>

#include "bpf/rate_window.h"

namespace gotap {

class RateLimit {
 public:
  // per_s 0: every call is allowed.
  RateLimit(uint32_t per_s, size_t funcs) : per_s_(per_s), state_(funcs) {}
  bool enabled() const { return per_s_ != 0; }
  // Whether a call of `func` at now_ns may be reported; a call refused is counted.
  bool allow(size_t func, uint64_t now_ns) {
    if (!per_s_ || func >= state_.size()) return true;
    Bucket& b = state_[func];
    if (gotap_rate_take(&b.ring, now_ns, per_s_)) return true;
    ++b.dropped;
    return false;
  }
  uint64_t dropped(size_t func) const { return func < state_.size() ? state_[func].dropped : 0; }
  uint64_t dropped_total() const {
    uint64_t n = 0;
    for (const auto& b : state_) n += b.dropped;
    return n;
  }

 private:
  struct Bucket {
    gotap_rate_ring ring{};
    uint64_t dropped = 0;
  };
  uint32_t per_s_;
  std::vector<Bucket> state_;
};

}  // namespace gotap
