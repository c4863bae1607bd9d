#include "core/events/summary.h"

namespace gotap {

Event summary_event(const RunSummary& s) {
  Event ev = {{"event", "summary"},       {"ts_ns", s.ts_ns},      {"backend", s.backend},
              {"functions", s.functions}, {"probes", s.probes},    {"events", s.events},
              {"lost", s.lost},           {"ended_by", s.ended_by}};
  if (s.pid) ev["pid"] = s.pid;
  if (s.exit_code) ev["exit_code"] = *s.exit_code;
  if (s.exit_signal) ev["exit_signal"] = *s.exit_signal;
  for (auto it = s.extra.begin(); it != s.extra.end(); ++it)
    if (!ev.contains(it.key())) ev[it.key()] = it.value();
  return ev;
}

}  // namespace gotap
