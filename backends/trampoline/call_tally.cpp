#include "backends/trampoline/call_tally.h"

#include <algorithm>
#include <cstring>

#include "core/plan/event_ring.h"

namespace gotap::trampoline {

CallTally::CallTally(const TraceSites& sites, size_t nfuncs, const cond::Condition* cond,
                     uint64_t bias, bool timed)
    : sites_(sites), timed_(timed), reader_(sites.shape), funcs_(nfuncs), keeps_open_(nfuncs) {
  if (cond) cond_ = std::make_unique<RecordCondition>(*cond, bias);
  // A count whose function has no RET to see (decided at the entry, no error result: its
  // RETs have no jumps) keeps nothing for a return that will not come.
  for (size_t f = 0; f < nfuncs; ++f)
    keeps_open_[f] = timed_ || (cond_ && cond_->at_ret(f)) || f >= sites_.cfg.funcs.size() ||
                     sites_.cfg.funcs[f].has_error;
}

CallTally::~CallTally() = default;

size_t CallTally::drain(uint8_t* ring) {
  return reader_.drain(ring, [this](const uint8_t* r) { add(r); });
}

size_t CallTally::finish(uint8_t* ring) {
  return reader_.finish(ring, [this](const uint8_t* r) { add(r); });
}

void CallTally::add(const uint8_t* record) {
  RingRecord r;
  std::memcpy(&r, record, sizeof r);
  const uint32_t patch = r.id >> 1;
  if (patch >= sites_.probe.size()) return;
  const int func = static_cast<int>(sites_.cfg.sites[sites_.probe[patch]].func_id);
  if (size_t(func) >= funcs_.size()) return;
  const RecordCapture& cap = sites_.captures[patch];
  const CallKey key{r.goid, r.depth};
  const bool at_ret = cond_ && cond_->at_ret(size_t(func));
  if (!(r.id & 1)) {
    // A call left open at the same depth of the same goroutine is over (a panic unwound
    // it): the new one replaces it.
    Open o{func, r.tsc};
    o.rejected =
        cond_ && !cond_->run(size_t(func), false, record, cap, int64_t(r.goid), 0, o.bits, o.vals);
    if (!timed_ && !at_ret && !o.rejected) ++funcs_[func].calls;
    if (keeps_open_[func])
      open_[key] = o;
    else
      open_.erase(key);
    return;
  }
  auto it = open_.find(key);
  if (it == open_.end() || it->second.func != func) {
    // Nothing to decide on: neither the entry's part of the condition nor a duration.
    ++unmatched_;
    return;
  }
  Open o = it->second;
  open_.erase(it);
  if (o.rejected) return;
  const uint64_t duration = clock_.ns(r.tsc > o.tsc ? r.tsc - o.tsc : 0);
  if (at_ret &&
      !cond_->run(size_t(func), true, record, cap, int64_t(r.goid), duration, o.bits, o.vals))
    return;
  Func& f = funcs_[func];
  if (timed_) {
    ++f.calls;
    f.latency.add(duration);
  } else if (at_ret) {
    ++f.calls;
  }
  const int8_t ew = patch < sites_.err_word.size() ? sites_.err_word[patch] : int8_t(-1);
  if (ew >= 0) {
    uint64_t type = 0;
    std::memcpy(&type, record + kTraceWords + 8 * size_t(ew), 8);
    if (type) ++f.failed;
  }
}

}  // namespace gotap::trampoline
