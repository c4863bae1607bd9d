// --rate N in user space (the ptrace backend; the eBPF one does the same in the kernel,
// bpf/call_limits.h): per function a bucket of N tokens, refilled whole at each second of
// CLOCK_MONOTONIC, the clock of every ts_ns, so that no second of the events' timestamps
// holds more than N reported calls.
#pragma once

#include <cstdint>
#include <vector>

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
    const uint64_t sec = now_ns / 1'000'000'000;
    if (b.second != sec) {
      b.second = sec;
      b.taken = 0;
    }
    if (b.taken < per_s_) {
      ++b.taken;
      return true;
    }
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
    uint64_t second = UINT64_MAX;
    uint32_t taken = 0;
    uint64_t dropped = 0;
  };
  uint32_t per_s_;
  std::vector<Bucket> state_;
};

}  // namespace gotap
