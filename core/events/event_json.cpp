// The JSON form of every typed event (docs/json.md): the one place the field names live.
#include <algorithm>

#include "core/events/typed_events.h"

namespace gotap {

namespace {

// Set key by key: a braced initializer list builds every pair as a temporary and then copies
// it, which costs a traced call as much as a part of its decoding (docs/benchmarks.md).
Event site_fields(const char* kind, const CallSite& s) {
  Event ev = Event::object();
  ev["event"] = kind;
  ev["ts_ns"] = s.ts_ns;
  ev["pid"] = s.pid;
  ev["tid"] = s.tid;
  if (s.goid != kNoGoid) ev["goid"] = s.goid;
  ev["func"] = s.func;
  return ev;
}

Event params(const std::vector<Param>& ps) {
  auto a = Event::array();
  a.get_ref<Event::array_t&>().reserve(ps.size());
  for (const auto& p : ps) {
    Event& e = a.emplace_back(Event::object());
    e["name"] = p.name;
    e["type"] = p.type;
    e["value"] = p.value;
  }
  return a;
}

void source_fields(Event& ev, const GoroutineSource& s) {
  if (s.parent_goid) ev["parent_goid"] = *s.parent_goid;
  if (!s.func.empty()) ev["func"] = s.func;
  if (!s.created_by.empty()) ev["created_by"] = s.created_by;
}

Event buckets(const std::vector<BucketCount>& bs) {
  auto a = Event::array();
  for (const auto& b : bs) a.push_back({{"lo_ns", b.lo}, {"hi_ns", b.hi}, {"count", b.count}});
  return a;
}

}  // namespace

Event to_event(const CallEntry& e) {
  Event ev = site_fields("entry", e);
  ev["args"] = params(e.args);
  if (e.inlined) {
    ev["inlined"] = true;
    if (!e.inlined_in.empty()) ev["inlined_in"] = e.inlined_in;
  }
  if (e.stack) ev["stack"] = *e.stack;
  return ev;
}

Event to_event(const CallReturn& e) {
  Event ev = site_fields("return", e);
  if (e.duration_ns) ev["duration_ns"] = *e.duration_ns;
  if (e.wall_ns) ev["wall_ns"] = *e.wall_ns;
  ev["results"] = params(e.results);
  if (e.stack) ev["stack"] = *e.stack;
  if (e.why) ev["why"] = *e.why;
  return ev;
}

Event to_event(const CallUnfinished& e) {
  Event ev = site_fields("unfinished", e);
  ev["entry_ts_ns"] = e.entry_ts_ns;
  if (!e.reason.empty()) ev["reason"] = e.reason;
  return ev;
}

Event to_event(const FuncCount& e) {
  Event ev = {{"event", "count"}, {"func", e.func}, {"count", e.count}};
  if (e.failed) ev["failed"] = *e.failed;
  if (e.processes) {
    Event procs = Event::array();
    for (const auto& p : *e.processes)
      procs.push_back({{"pid", p.pid}, {"comm", p.comm}, {"count", p.count}});
    ev["processes"] = std::move(procs);
    if (e.processes_lost) ev["processes_lost"] = e.processes_lost;
  }
  return ev;
}

Event to_event(const FuncLatency& e) {
  const LatencySummary& s = e.latency;
  Event ev = {{"event", "latency"},
              {"func", e.func},
              {"count", s.count},
              {"min_ns", s.min_ns},
              {"max_ns", s.max_ns},
              {"avg_ns", s.count ? s.sum_ns / s.count : 0},
              {"p50_ns", percentile(s, 0.50)},
              {"p90_ns", percentile(s, 0.90)},
              {"p99_ns", percentile(s, 0.99)},
              {"buckets", buckets(log2_buckets(s))},
              {"fine_buckets", buckets(fine_buckets(s))}};
  if (e.failed) ev["failed"] = *e.failed;
  return ev;
}

Event to_event(const RunSummary& s) {
  Event ev = {{"event", "summary"},       {"ts_ns", s.ts_ns},      {"backend", s.backend},
              {"functions", s.functions}, {"probes", s.probes},    {"events", s.events},
              {"lost", s.lost},           {"ended_by", s.ended_by}};
  if (s.pid) ev["pid"] = s.pid;
  if (s.exit_code) ev["exit_code"] = *s.exit_code;
  if (s.exit_signal) ev["exit_signal"] = *s.exit_signal;
  // A backend's own counters never replace a contract field.
  for (auto it = s.extra.begin(); it != s.extra.end(); ++it)
    if (!ev.contains(it.key())) ev[it.key()] = it.value();
  return ev;
}

Event to_event(const GoroutineCreate& e) {
  Event ev = {
      {"event", "gcreate"}, {"ts_ns", e.ts_ns}, {"pid", e.pid}, {"tid", e.tid}, {"goid", e.goid}};
  source_fields(ev, e.source);
  return ev;
}

Event to_event(const GoroutineState& e) {
  Event ev = {{"event", "gstate"}, {"ts_ns", e.ts_ns}, {"pid", e.pid}, {"tid", e.tid},
              {"goid", e.goid},    {"from", e.from},   {"to", e.to}};
  if (!e.reason.empty()) ev["reason"] = e.reason;
  if (e.source) source_fields(ev, *e.source);
  if (!e.parked_at.empty()) ev["parked_at"] = e.parked_at;
  if (e.waker_goid) {
    Event w = {{"goid", *e.waker_goid}};
    if (!e.waker_func.empty()) w["func"] = e.waker_func;
    ev["woken_by"] = std::move(w);
  }
  return ev;
}

Event to_event(const GoroutineExit& e) {
  return {{"event", "gexit"}, {"ts_ns", e.ts_ns}, {"pid", e.pid}, {"goid", e.goid}};
}

void EventSink::emit_entry(const CallEntry& e) {
  emit(to_event(e));
}
void EventSink::emit_return(const CallReturn& r) {
  emit(to_event(r));
}
void EventSink::emit_unfinished(const CallUnfinished& u) {
  emit(to_event(u));
}

Event to_event(const TypedEvent& e) {
  return std::visit([](const auto& x) { return to_event(x); }, e);
}

std::vector<Event> count_events(std::vector<FuncCount> counts) {
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.func < b.func; });
  std::vector<Event> out;
  for (const auto& c : counts)
    if (c.count) out.push_back(to_event(c));
  return out;
}

std::vector<Event> latency_events(std::vector<FuncLatency> latencies) {
  std::stable_sort(latencies.begin(), latencies.end(),
                   [](const auto& a, const auto& b) { return a.func < b.func; });
  std::vector<Event> out;
  for (const auto& l : latencies)
    if (l.latency.count) out.push_back(to_event(l));
  return out;
}

std::vector<Event> unfinished_events(std::vector<CallUnfinished> calls) {
  std::stable_sort(calls.begin(), calls.end(),
                   [](const auto& a, const auto& b) { return a.entry_ts_ns < b.entry_ts_ns; });
  std::vector<Event> out;
  for (const auto& c : calls) out.push_back(to_event(c));
  return out;
}

}  // namespace gotap
