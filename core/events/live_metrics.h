// What `--prometheus` serves while a trace runs: the backend's own per-function counters,
// read when a scrape asks for them (so nothing accumulates between scrapes), plus the
// goroutine states seen in the event stream. The exporter thread reads; the tracing thread
// writes. The backend's reader runs under a mutex of its own, never under the one events
// take: a backend emits events while it holds the lock its reader takes, so one mutex for
// both deadlocked a scrape against a return with `why` (trampoline, CI).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/events/events.h"
#include "core/events/latency.h"

namespace gotap {

struct FuncMetrics {
  std::string func;
  uint64_t calls = 0;
  // Whether durations were measured (latency, trace); count measures none.
  bool timed = false;
  LatencySummary latency;
  std::optional<uint64_t> failed;        // calls whose error result was not nil, when it has one
  std::optional<uint64_t> rate_limited;  // calls --rate left out, when it is given
};

struct MetricsSnapshot {
  int pid = 0;  // the traced process; 0 until the backend knows it
  std::vector<FuncMetrics> funcs;
  uint64_t lost = 0;
  // --max-overhead: functions detached so far (gotap_detached_functions_total); unset without.
  std::optional<uint64_t> detached_functions;
  bool goroutines = false;                  // goroutine events are being traced
  std::map<std::string, uint64_t> gstates;  // state -> goroutines in it
  bool ended = false;                       // the trace is over: these are the final values
  // --why: the traced calls' time by (func, part, reason), in ns (gotap_call_seconds_total).
  // reason is the wait reason for part "waiting", "" otherwise.
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> why_ns;
};

// --why: adds one `why` object (a call's, or a sum of calls', docs/json.md) of func to why_ns,
// as gotap_call_seconds_total counts it. A part that is null (not measured) adds nothing, so
// that its series is absent rather than 0.
void add_why_ns(std::map<std::tuple<std::string, std::string, std::string>, uint64_t>& why_ns,
                const std::string& func, const Event& why);

class LiveMetrics {
 public:
  // Fills `funcs` and `lost` (and may set `pid`, `detached_functions`, or `why_ns` whole)
  // from the backend's counters. Called on the exporter's thread, not under the mutex that
  // observe() and add_why() take; the backend keeps whatever it reads alive until end().
  using Reader = std::function<void(MetricsSnapshot&)>;

  // The probes are live in `pid`; `read` answers scrapes from now on.
  void begin(int pid, Reader read);
  // Reads one last time and forgets the reader, before the backend frees what it reads:
  // later scrapes get these final values.
  void end();
  // Goroutine events (gstate, gcreate, gexit) keep the per-state gauge; others are ignored.
  void observe(const Event& ev);
  // --why: adds one returned call's `why` (docs/json.md) to why_ns. A part that is null
  // (not measured) adds nothing, so that its series is absent rather than 0.
  void add_why(const std::string& func, const Event& why);
  // What a scrape serves now. Counts the scrapes that saw the final values.
  MetricsSnapshot scrape();
  // The same values for gotap's own use (-i): not a scrape, so --prometheus-linger still
  // waits for Prometheus to read the final values.
  MetricsSnapshot read();
  // How many scrapes have served the final values (0 while the trace runs).
  uint64_t final_scrapes();

 private:
  // Reads the backend's counters into last_; reader_mu_ held, mu_ not.
  void read_backend();
  MetricsSnapshot snapshot(bool scraped);

  // Order: reader_mu_, then the backend's own lock (inside reader_), then mu_ (never held
  // while taking either of the others).
  std::mutex reader_mu_;
  Reader reader_;  // under reader_mu_
  std::mutex mu_;
  MetricsSnapshot last_;
  // Each goroutine seen since the trace began, by goid: its state now. Exited goroutines are
  // dropped, so this holds at most the program's live goroutines.
  std::unordered_map<uint64_t, std::string> gstate_;
  uint64_t final_scrapes_ = 0;
};

// A sink that shows goroutine events to `metrics` and passes every event on.
std::unique_ptr<EventSink> make_metrics_observer(std::unique_ptr<EventSink> next,
                                                 LiveMetrics& metrics);
// --why: a sink that adds each return's `why` to `metrics` and passes every event on.
std::unique_ptr<EventSink> make_why_metrics_observer(std::unique_ptr<EventSink> next,
                                                     LiveMetrics& metrics);

}  // namespace gotap
