// The consumer of a tracing run's ring (`trace`, `graph` on the trampoline backend): each
// record becomes the eBPF backend's event for the same site (trace_capture.h), which its
// decoder turns into a call event for the sink. Entries and returns pair as a timed run's do
// (call_timer.h): by goroutine and g.stack.hi - RSP. A return whose entry was not seen has
// no duration; an entry replaced by another at the same depth of its goroutine (a panic
// unwound it) is `unfinished` then, and those still open at the end are `unfinished` too.
// --rate N: each call takes its token at its entry (a return whose entry was not seen, at the
// return); a call refused is neither reported nor `unfinished`, only counted.
// --slower and --errors (ReturnFilter) are decided at the return: each entry is held until
// then, and goes out just before its return when the call is selected (and --rate lets it
// through); a call not selected, not returned, or whose entry was not seen is not reported.
// --if (RecordCondition) replaces them (its program holds them too): each call is decided at
// its entry on the entry's record or, when the condition reads results or the duration, held
// and decided at its return; a call it rejects is neither reported nor `unfinished`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/ebpf/event_decoder.h"
#include "backends/trampoline/call_timer.h"
#include "backends/trampoline/record_condition.h"
#include "backends/trampoline/trace_capture.h"
#include "core/events/events.h"
#include "core/events/rate_limit.h"
#include "core/events/typed_events.h"
#include "core/plan/plan.h"

namespace gotap::trampoline {

// The conditions the reader decides itself, at the return: --slower and --errors without --if.
struct ReturnFilter {
  std::optional<uint64_t> slower_ns;
  bool errors = false;
  bool active() const { return slower_ns || errors; }
};

class TraceReader {
 public:
  // `sites` by PatchSet index; `bias`: where pid loaded the binary minus its link address.
  TraceReader(const ProbePlan& plan, const TraceSites& sites, uint64_t bias, int pid, int max_str,
              EventSink& sink, uint32_t rate_per_s = 0, ReturnFilter filter = {},
              const cond::Condition* cond = nullptr);
  ~TraceReader();
  size_t drain(uint8_t* ring);
  size_t finish(uint8_t* ring);
  uint64_t dropped(const uint8_t* ring) const { return reader_.dropped(ring); }
  // What an `unfinished` call says once the ring lost `dropped` records: its return may be
  // one of them ("" when none was lost: it never returned).
  static std::string lost_return(uint64_t dropped);
  bool behind(const uint8_t* ring) const { return reader_.behind(ring); }
  // The calls still open, as `unfinished` at `now_ns`.
  std::vector<CallUnfinished> open_calls(uint64_t now_ns) const;
  uint64_t events() const { return events_; }
  uint64_t unmatched_returns() const { return unmatched_; }
  uint64_t rate_limited() const { return rate_.dropped_total(); }
  uint64_t rate_limited(size_t func) const { return rate_.dropped(func); }
  // Calls entered, by plan index.
  const std::vector<uint64_t>& calls() const { return calls_; }
  TscClock& clock() { return clock_; }

 private:
  void add(const uint8_t* record);
  struct Open {
    int func;
    uint64_t tsc;
    uint32_t tid;
    // The entry event's ts_ns, kept: the clock's rate is measured again as the trace goes,
    // and an unfinished call's entry_ts_ns must be its entry event's to the ns.
    uint64_t ts;
    bool reported;                  // --rate let it through
    std::optional<CallEntry> held;  // out only if the return is selected
    bool at_ret = false;            // decided at the return (a ReturnFilter, or --if's)
    bool rejected = false;          // --if rejected it at its entry
    uint64_t bits = 0;              // what --if's entry program keeps for the return
    uint64_t vals[GOTAP_COND_VALS] = {};
  };
  // Whether a return passes filter_ (the entry was seen when duration is set).
  bool selected(const CallReturn& r, std::optional<uint64_t> duration) const;
  const ProbePlan& plan_;
  const TraceSites& sites_;
  int pid_;
  EventSink& sink_;
  std::unique_ptr<ebpf::EventDecoder> decoder_;
  RingReader reader_;              // the sites' shape
  const uint8_t* ring_ = nullptr;  // the ring being read: its count of records lost
  TscClock clock_;
  std::unordered_map<CallKey, Open, CallKeyHash> open_;
  std::vector<uint64_t> calls_;
  uint64_t events_ = 0, unmatched_ = 0;
  std::unique_ptr<gotap_event> ev_ = std::make_unique<gotap_event>();
  RateLimit rate_;
  ReturnFilter filter_;
  std::unique_ptr<RecordCondition> cond_;
};

}  // namespace gotap::trampoline
