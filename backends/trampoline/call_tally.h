// The consumer of a decided run's ring: `count` with a condition (--if, --slower, --errors)
// and `latency --if` or `--errors` on the trampoline backend. Its records are trace records
// (event_ring.h, kTraceRing) that hold only what the condition reads and, at each RET of a
// function with an error result, the error's type word (trace_sites, TraceSites::tally):
// nothing is decoded. Calls pair as a timed run's do (call_timer.h), are decided as
// `trace --if` decides them (record_condition.h), and are added up per function: the calls
// selected, those of them that failed, and (latency) their times.
// - count: a call decided at its entry counts there, one decided at its return (the
//   condition reads results or the duration) counts there, when its entry was seen.
// - latency: a call is timed at its return, when its entry was seen and it is selected.
// - failed: a selected call whose RET record's error type word is not zero; a call whose
//   entry was not seen counts no failure (its selection is unknown), as on eBPF.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/trampoline/call_timer.h"
#include "backends/trampoline/record_condition.h"
#include "backends/trampoline/trace_capture.h"
#include "core/events/latency.h"

namespace gotap::trampoline {

class CallTally {
 public:
  struct Func {
    uint64_t calls = 0, failed = 0;
    LatencySummary latency;  // timed tallies only
  };
  // `sites` by PatchSet index (made with tally); `timed`: latency, else count; `bias`: where
  // the binary was loaded minus its link address (for the condition's addresses).
  // `cond` (may be null: every call is selected). The ring's shape is the sites'.
  CallTally(const TraceSites& sites, size_t nfuncs, const cond::Condition* cond, uint64_t bias,
            bool timed);
  ~CallTally();
  size_t drain(uint8_t* ring);
  size_t finish(uint8_t* ring);
  uint64_t dropped(const uint8_t* ring) const { return reader_.dropped(ring); }
  const std::vector<Func>& funcs() const { return funcs_; }
  size_t open_calls() const { return open_.size(); }
  uint64_t unmatched_returns() const { return unmatched_; }
  TscClock& clock() { return clock_; }

 private:
  struct Open {
    int func;
    uint64_t tsc;
    bool rejected = false;  // decided at its entry: not selected
    uint64_t bits = 0;      // what the entry program keeps for the return
    uint64_t vals[GOTAP_COND_VALS] = {};
  };
  void add(const uint8_t* record);
  const TraceSites& sites_;
  std::unique_ptr<RecordCondition> cond_;
  bool timed_;
  RingReader reader_;
  TscClock clock_;
  std::unordered_map<CallKey, Open, CallKeyHash> open_;
  std::vector<Func> funcs_;
  std::vector<bool> keeps_open_;  // by function: whether an entry waits for its return
  uint64_t unmatched_ = 0;
};

}  // namespace gotap::trampoline
