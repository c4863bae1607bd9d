// Goroutine life cycles from two runtime probes, the same for every backend: a status change
// (runtime.casgstatus(gp, old, new)) and a creation (runtime.newproc1(fn, callergp, callerpc)).
// Backends report what the probes saw; this turns it into the gstate, gcreate and gexit
// events of docs/json.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/events/events.h"
#include "core/model/runtime_offsets.h"

namespace gotap {

// The runtime's goroutine status words (runtime2.go, _Gidle .. _Gdeadextra).
enum GStatus : uint32_t {
  kGIdle = 0,
  kGRunnable = 1,
  kGRunning = 2,
  kGSyscall = 3,
  kGWaiting = 4,
  kGDead = 6,
  kGCopystack = 8,
  kGPreempted = 9,
  kGLeaked = 10,     // Go 1.26
  kGDeadExtra = 11,  // Go 1.26: the g of a cgo callback's extra M while idle
};
// "running", "waiting", ...; "status_N" for a value this version of gotap does not know.
std::string gstatus_name(uint32_t status);
// A libgo status as gc's: libgo's own _Gexitingsyscall (10, between syscall and runnable in
// exitsyscall0) is still in the system call; gc's 10 is Go 1.26's leaked.
inline uint32_t libgo_status(uint32_t s) {
  return s == 10 ? kGSyscall : s;
}

// Where a goroutine came from, as its g records it: read when gotap first sees a goroutine
// that was created before the trace started.
struct GoroutineOrigin {
  bool has_parent = false;  // g.parentGoid exists from Go 1.21 on
  uint64_t parent_goid = 0;
  uint64_t gopc = 0;     // the return address of the go statement's call
  uint64_t startpc = 0;  // the start function
};

// The stretch of runtime.g that holds parentGoid (Go 1.21+), gopc and startpc, so that one
// read gives a GoroutineOrigin; size 0 when the offsets are unknown.
struct OriginSpan {
  uint32_t offset = 0, size = 0;
};
OriginSpan origin_span(const RuntimeOffsets& o);
// Decodes the bytes of origin_span(o) (fewer bytes: nullopt).
std::optional<GoroutineOrigin> parse_origin(const RuntimeOffsets& o, const uint8_t* bytes,
                                            size_t n);

// --why (GoroutineProbes::walk): what a backend read beside a status change. At a park
// (to waiting), the parked goroutine's stack; at a wake-up (waiting to runnable), the
// goroutine the waking thread runs (m.curg) and its stack. pcs are return addresses (or
// saved pcs), innermost first.
struct StatusStacks {
  std::optional<uint64_t> waker_goid;  // set at a wake-up: 0 when the thread ran no goroutine
  std::vector<uint64_t> pcs;
};

// The innermost of `funcs` outside the runtime, sync and internal/ packages ("" when none):
// where Go code parked, or what woke it.
std::string first_user_frame(const std::vector<std::string>& funcs);

class GoroutineEvents {
 public:
  // func_of: the function containing a run-time pc ("" when none). wait_reasons: the names
  // of g.waitreason's values in the traced program's Go release (empty: unknown).
  // reason_from_park_only: before Go 1.20 only runtime.park_m (gopark) sets g.waitreason
  // before the change to waiting; other callers set it after, or never, so the value read
  // at the probe is a stale one and is not reported.
  GoroutineEvents(EventSink& sink, int pid, std::function<std::string(uint64_t)> func_of,
                  std::vector<std::string> wait_reasons = {}, bool reason_from_park_only = false);

  // runtime.newproc1 was entered on thread tid by the goroutine parent_goid to start
  // start_pc; the go statement is at caller_pc. The new goroutine's status leaves dead on
  // the same thread, and newproc1 returns it (on_created), before any other thread can see it.
  void on_create(uint64_t ts, int tid, uint64_t parent_goid, uint64_t start_pc, uint64_t caller_pc);
  // runtime.casgstatus(gp, from, to), gp's goid and g.waitreason (-1: not read) read at the
  // probe. The runtime sets waitreason before it parks a goroutine.
  // `origin`, when given, describes gp; it is used the first time gotap sees goid.
  // caller_pc: casgstatus's return address (0: not read).
  // stacks: with --why, what the backend read (null when it read nothing).
  void on_status(uint64_t ts, int tid, uint64_t goid, uint32_t from, uint32_t to,
                 int wait_reason = -1, const GoroutineOrigin* origin = nullptr,
                 uint64_t caller_pc = 0, const StatusStacks* stacks = nullptr);
  // Whether goid has been reported already (created, or seen changing state): a backend
  // reads its origin only when it has not.
  bool known(uint64_t goid) const { return known_.count(goid) > 0; }
  // runtime.newproc1 returned the new goroutine on thread tid: now its goid is set.
  void on_created(uint64_t ts, int tid, uint64_t goid);

  uint64_t events() const { return events_; }

 private:
  struct Creation {
    uint64_t ts = 0;
    uint64_t parent_goid = 0;
    uint64_t start_pc = 0, caller_pc = 0;
    bool status_seen = false;  // its status change from dead, held back until on_created
    uint64_t status_ts = 0;
    uint32_t from = 0, to = 0;
    int reason = -1;
  };
  void emit_status(uint64_t ts, int tid, uint64_t goid, uint32_t from, uint32_t to, int reason,
                   const GoroutineOrigin* origin, const StatusStacks* stacks = nullptr);
  void emit(const Event& ev);

  EventSink& sink_;
  int pid_;
  std::function<std::string(uint64_t)> func_of_;
  std::vector<std::string> wait_reasons_;
  bool reason_from_park_only_;
  std::unordered_map<int, Creation> creating_;  // by thread
  std::unordered_set<uint64_t> known_;          // goroutines reported and not exited
  uint64_t events_ = 0;
};

}  // namespace gotap
