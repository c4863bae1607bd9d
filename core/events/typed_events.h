// The events of a trace as types. Both backends and core's goroutine tracker fill these
// structs; to_event() (event_json.cpp) is the one place that spells their JSON field names
// (docs/json.md), so the backends cannot drift apart field by field. Decoded values stay
// JSON: their shape follows the Go type, which the value decoder alone knows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/events/events.h"
#include "core/events/latency.h"

namespace gotap {

// One argument or result: its name and type as the plan has them, and its decoded value.
struct Param {
  std::string name, type;
  Event value;
};

// A call site's goid in a program whose g gotap does not read (gccgo, ProbePlan::reads_g):
// the JSON leaves "goid" out and the text shows "-".
constexpr int64_t kNoGoid = -1;

// Where a call happened. pid and tid are the kernel's; goid is 0 when it could not be read.
struct CallSite {
  uint64_t ts_ns = 0;
  int pid = 0, tid = 0;
  int64_t goid = 0;
  std::string func;
};

struct CallEntry : CallSite {
  CallEntry() = default;
  explicit CallEntry(CallSite s) : CallSite(std::move(s)) {}
  std::vector<Param> args;
  // An inlined copy: it has no return, and `inlined_in` names the function it sits in
  // (empty when the plan does not say).
  bool inlined = false;
  std::string inlined_in;
  std::optional<Event> stack;  // --stack: the caller frames
};

struct CallReturn : CallSite {
  CallReturn() = default;
  explicit CallReturn(CallSite s) : CallSite(std::move(s)) {}
  std::optional<uint64_t> duration_ns;  // absent when the entry was not seen
  // ptrace: entry to return as the clock saw it, including the time gotap held the goroutine
  // stopped (duration_ns leaves that out).
  std::optional<uint64_t> wall_ns;
  std::vector<Param> results;
  std::optional<Event> stack;
  std::optional<Event> why;  // --why: where its time went (core/why/why_tracker.h)
};

// A call still open when tracing ended, or entered again without returning (a panic):
// ts_ns is when that was found, entry_ts_ns when it began.
struct CallUnfinished : CallSite {
  CallUnfinished() = default;
  CallUnfinished(CallSite s, uint64_t entry_ts) : CallSite(std::move(s)), entry_ts_ns(entry_ts) {}
  uint64_t entry_ts_ns = 0;
  // Set when the call may have returned unseen (the trampoline backend's ring lost records,
  // one of which may be its return): said in place of "never returned".
  std::string reason;
};

// One process's calls of a function (count --all).
struct ProcessCount {
  int64_t pid = 0;
  std::string comm;  // the thread's name at the process's first call
  uint64_t count = 0;
};

// `failed`: calls whose `error` result was not nil; absent for a function without one.
// `processes` (count --all): the calls by process, most first; `processes_lost` the calls
// counted in `count` that no process could be kept for (the kernel's table was full).
struct FuncCount {
  FuncCount() = default;
  FuncCount(std::string f, uint64_t c, std::optional<uint64_t> fail = std::nullopt)
      : func(std::move(f)), count(c), failed(fail) {}
  std::string func;
  uint64_t count = 0;
  std::optional<uint64_t> failed;
  std::optional<std::vector<ProcessCount>> processes;
  uint64_t processes_lost = 0;
};

struct FuncLatency {
  std::string func;
  LatencySummary latency;
  std::optional<uint64_t> failed;
};

// The `summary` event that ends every run.
struct RunSummary {
  std::string backend;
  uint64_t ts_ns = 0;  // when tracing ended (CLOCK_MONOTONIC, as every ts_ns)
  uint64_t functions = 0, probes = 0, events = 0;
  // Events dropped before they reached the output, and nothing else.
  uint64_t lost = 0;
  int pid = 0;  // the traced process; 0 when there was none in particular (--all)
  // "exit" (the process exited), "exec" (it replaced itself), "stop" (duration, a signal,
  // the reader gone).
  std::string ended_by = "stop";
  std::optional<int> exit_code;    // when it exited: its status, 128 + signal if killed
  std::optional<int> exit_signal;  // when a signal killed it
  Event extra = Event::object();   // backend-specific counters, under their own names
};

// Where a goroutine came from: its start function and the function with its go statement
// ("" when unknown), and its parent when the runtime records it.
struct GoroutineSource {
  std::optional<uint64_t> parent_goid;
  std::string func, created_by;
};

struct GoroutineCreate {
  uint64_t ts_ns = 0;
  int pid = 0, tid = 0;
  uint64_t goid = 0;
  GoroutineSource source;  // parent_goid is always known here
};

struct GoroutineState {
  uint64_t ts_ns = 0;
  int pid = 0, tid = 0;
  uint64_t goid = 0;
  std::string from, to;
  std::string reason;  // why it waits; empty when not waiting or not known
  // Set the first time a goroutine created before the trace shows up.
  std::optional<GoroutineSource> source;
  // --why: where it parked (on the way to waiting), and at a wake-up the goroutine the waking
  // thread ran (0: none, the scheduler's own) and where ("" when not read).
  std::string parked_at;
  std::optional<uint64_t> waker_goid;
  std::string waker_func;
};

struct GoroutineExit {
  uint64_t ts_ns = 0;
  int pid = 0;
  uint64_t goid = 0;
};

using TypedEvent = std::variant<CallEntry, CallReturn, CallUnfinished, FuncCount, FuncLatency,
                                RunSummary, GoroutineCreate, GoroutineState, GoroutineExit>;

Event to_event(const CallEntry& e);
Event to_event(const CallReturn& e);
Event to_event(const CallUnfinished& e);
Event to_event(const FuncCount& e);
Event to_event(const FuncLatency& e);
Event to_event(const RunSummary& e);
Event to_event(const GoroutineCreate& e);
Event to_event(const GoroutineState& e);
Event to_event(const GoroutineExit& e);
Event to_event(const TypedEvent& e);

// The end-of-run events, in the same order on every backend: counts and latencies by
// function name, leaving out functions never called; unfinished calls by entry time.
std::vector<Event> count_events(std::vector<FuncCount> counts);
std::vector<Event> latency_events(std::vector<FuncLatency> latencies);
std::vector<Event> unfinished_events(std::vector<CallUnfinished> calls);

}  // namespace gotap
