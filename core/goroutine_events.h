// Goroutine life cycles from two runtime probes, the same for every backend: a status change
// (runtime.casgstatus(gp, old, new)) and a creation (runtime.newproc1(fn, callergp, callerpc)).
// Backends report what the probes saw; this turns it into the gstate, gcreate and gexit
// events of CONTRACT.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/events.h"

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

class GoroutineEvents {
 public:
  // func_of: the function containing a run-time pc ("" when none). wait_reasons: the names
  // of g.waitreason's values in the traced program's Go release (empty: unknown).
  GoroutineEvents(EventSink& sink, int pid, std::function<std::string(uint64_t)> func_of,
                  std::vector<std::string> wait_reasons = {});

  // runtime.newproc1 was entered on thread tid by the goroutine parent_goid to start
  // start_pc; the go statement is at caller_pc. The new goroutine's status leaves dead on
  // the same thread, and newproc1 returns it (on_created), before any other thread can see it.
  void on_create(uint64_t ts, int tid, uint64_t parent_goid, uint64_t start_pc, uint64_t caller_pc);
  // runtime.casgstatus(gp, from, to), gp's goid and g.waitreason (-1: not read) read at the
  // probe. The runtime sets waitreason before it parks a goroutine.
  void on_status(uint64_t ts, int tid, uint64_t goid, uint32_t from, uint32_t to,
                 int wait_reason = -1);
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
  void emit_status(uint64_t ts, int tid, uint64_t goid, uint32_t from, uint32_t to, int reason);
  void emit(const Event& ev);

  EventSink& sink_;
  int pid_;
  std::function<std::string(uint64_t)> func_of_;
  std::vector<std::string> wait_reasons_;
  std::unordered_map<int, Creation> creating_;  // by thread
  uint64_t events_ = 0;
};

}  // namespace gotap
