#include "core/model/wait_reasons.h"

#include <iterator>

namespace gotap {

namespace {

// runtime.waitReasonStrings, indexed by the waitReason constants, as runtime2.go declares
// them in each release (tests/unit/test_wait_reasons.cpp re-reads them from the Go sources
// when a toolchain is cached). Releases without a table here get no names.

constexpr const char* kGo1_19[] = {
    "",
    "GC assist marking",
    "IO wait",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "dumping heap",
    "garbage collection",
    "garbage collection scan",
    "panicwait",
    "select",
    "select (no cases)",
    "GC assist wait",
    "GC sweep wait",
    "GC scavenge wait",
    "chan receive",
    "chan send",
    "finalizer wait",
    "force gc (idle)",
    "semacquire",
    "sleep",
    "sync.Cond.Wait",
    "timer goroutine (idle)",
    "trace reader (blocked)",
    "wait for GC cycle",
    "GC worker (idle)",
    "preempted",
    "debug call",
};
constexpr const char* kGo1_21[] = {
    "",
    "GC assist marking",
    "IO wait",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "dumping heap",
    "garbage collection",
    "garbage collection scan",
    "panicwait",
    "select",
    "select (no cases)",
    "GC assist wait",
    "GC sweep wait",
    "GC scavenge wait",
    "chan receive",
    "chan send",
    "finalizer wait",
    "force gc (idle)",
    "semacquire",
    "sleep",
    "sync.Cond.Wait",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "trace reader (blocked)",
    "wait for GC cycle",
    "GC worker (idle)",
    "GC worker (active)",
    "preempted",
    "debug call",
    "GC mark termination",
    "stopping the world",
};
constexpr const char* kGo1_22[] = {
    "",
    "GC assist marking",
    "IO wait",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "dumping heap",
    "garbage collection",
    "garbage collection scan",
    "panicwait",
    "select",
    "select (no cases)",
    "GC assist wait",
    "GC sweep wait",
    "GC scavenge wait",
    "chan receive",
    "chan send",
    "finalizer wait",
    "force gc (idle)",
    "semacquire",
    "sleep",
    "sync.Cond.Wait",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "trace reader (blocked)",
    "wait for GC cycle",
    "GC worker (idle)",
    "GC worker (active)",
    "preempted",
    "debug call",
    "GC mark termination",
    "stopping the world",
    "flushing proc caches",
    "trace goroutine status",
    "trace proc status",
    "page trace flush",
    "coroutine",
};
constexpr const char* kGo1_23[] = {
    "",
    "GC assist marking",
    "IO wait",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "dumping heap",
    "garbage collection",
    "garbage collection scan",
    "panicwait",
    "select",
    "select (no cases)",
    "GC assist wait",
    "GC sweep wait",
    "GC scavenge wait",
    "chan receive",
    "chan send",
    "finalizer wait",
    "force gc (idle)",
    "semacquire",
    "sleep",
    "sync.Cond.Wait",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "trace reader (blocked)",
    "wait for GC cycle",
    "GC worker (idle)",
    "GC worker (active)",
    "preempted",
    "debug call",
    "GC mark termination",
    "stopping the world",
    "flushing proc caches",
    "trace goroutine status",
    "trace proc status",
    "page trace flush",
    "coroutine",
    "GC weak to strong wait",
};
constexpr const char* kGo1_24[] = {
    "",
    "GC assist marking",
    "IO wait",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "dumping heap",
    "garbage collection",
    "garbage collection scan",
    "panicwait",
    "select",
    "select (no cases)",
    "GC assist wait",
    "GC sweep wait",
    "GC scavenge wait",
    "chan receive",
    "chan send",
    "finalizer wait",
    "force gc (idle)",
    "semacquire",
    "sleep",
    "sync.Cond.Wait",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "sync.WaitGroup.Wait",
    "trace reader (blocked)",
    "wait for GC cycle",
    "GC worker (idle)",
    "GC worker (active)",
    "preempted",
    "debug call",
    "GC mark termination",
    "stopping the world",
    "flushing proc caches",
    "trace goroutine status",
    "trace proc status",
    "page trace flush",
    "coroutine",
    "GC weak to strong wait",
    "synctest.Run",
    "synctest.Wait",
    "chan receive (synctest)",
    "chan send (synctest)",
    "select (synctest)",
};
constexpr const char* kGo1_26[] = {
    "",
    "GC assist marking",
    "IO wait",
    "dumping heap",
    "garbage collection",
    "garbage collection scan",
    "panicwait",
    "GC assist wait",
    "GC sweep wait",
    "GC scavenge wait",
    "finalizer wait",
    "force gc (idle)",
    "GOMAXPROCS updater (idle)",
    "semacquire",
    "sleep",
    "chan receive (nil chan)",
    "chan send (nil chan)",
    "select (no cases)",
    "select",
    "chan receive",
    "chan send",
    "sync.Cond.Wait",
    "sync.Mutex.Lock",
    "sync.RWMutex.RLock",
    "sync.RWMutex.Lock",
    "sync.WaitGroup.Wait",
    "trace reader (blocked)",
    "wait for GC cycle",
    "GC worker (idle)",
    "GC worker (active)",
    "preempted",
    "debug call",
    "GC mark termination",
    "stopping the world",
    "flushing proc caches",
    "trace goroutine status",
    "trace proc status",
    "page trace flush",
    "coroutine",
    "GC weak to strong wait",
    "synctest.Run",
    "synctest.Wait",
    "chan receive (durable)",
    "chan send (durable)",
    "select (durable)",
    "sync.WaitGroup.Wait (durable)",
    "cleanup wait",
};

}  // namespace

std::vector<std::string> wait_reason_names(const GoVersion& v) {
  auto all = [](const auto& t) { return std::vector<std::string>(std::begin(t), std::end(t)); };
  if (v.major != 1) return {};
  switch (v.minor) {
    case 19:
      return all(kGo1_19);
    case 21:
      return all(kGo1_21);
    case 22:
      return all(kGo1_22);
    case 23:
      return all(kGo1_23);
    case 24:
      return all(kGo1_24);
    case 26:
    case 27:  // go1.27.3's runtime2.go declares the same list as 1.26's
      return all(kGo1_26);
    default:
      return {};
  }
}

bool wait_reason_only_from_park(const GoVersion& v) {
  // 1.20: seen in go1.20.1's runtime (buf 1.15.0): each of the 8 calls of casgstatus to
  // _Gwaiting stores the reason at g.waitreason just before it, park_m's excepted (gopark
  // stored it). tests/unit/test_wait_reasons.cpp checks the other releases' sources.
  return !v.at_least(1, 20);
}

}  // namespace gotap
