#include "core/why/why_tracker.h"

#include <algorithm>

#include <fmt/format.h>

namespace gotap::why {

Part part_of(const std::string& status) {
  // copystack: the goroutine grows its own stack, running. preempted: suspended for the GC
  // and resumed by the scheduler, so waiting for it, as runnable is.
  if (status == "running" || status == "copystack") return Part::Running;
  if (status == "runnable" || status == "preempted") return Part::Runnable;
  if (status == "syscall") return Part::Syscall;
  if (status == "waiting" || status == "leaked") return Part::Waiting;
  return Part::Other;
}

void WhyTracker::entry(uint64_t ts, int64_t goid, const std::string& func) {
  auto [it, fresh] = open_.try_emplace(goid);
  Goroutine& g = it->second;
  if (fresh || g.calls.empty()) {
    // Its status before is none of this call's business: from here it runs.
    g.part = Part::Running;
    g.since = ts;
    g.reason.clear();
  }
  g.calls.push_back({func, ts, {}});
  if (kernel_) g.calls.back().split.preempted_ns = 0;
  g.calls.back().split.syscalls_named = kernel_ && kernel_syscalls_;
}

void WhyTracker::preempted(uint64_t from, uint64_t to, int64_t goid) {
  auto it = open_.find(goid);
  if (it == open_.end()) return;
  Goroutine& g = it->second;
  // Only a goroutine on its thread can be preempted there: an interval that finds it parked
  // or runnable is not its own (a status change gotap missed).
  if (g.part != Part::Running && g.part != Part::Syscall) return;
  for (OpenCall& c : g.calls) {
    const uint64_t lo = std::max(from, c.entry_ts);
    if (!c.split.preempted_ns || to <= lo) continue;
    *c.split.preempted_ns += to - lo;
    (g.part == Part::Syscall ? c.preempted_syscall : c.preempted_running) += to - lo;
  }
}

void WhyTracker::syscall(uint64_t from, uint64_t to, int64_t goid, const std::string& name,
                         uint32_t count, uint64_t ns) {
  auto it = open_.find(goid);
  if (it == open_.end()) return;
  Goroutine& g = it->second;
  if (g.part != Part::Running && g.part != Part::Syscall) return;  // as in preempted()
  for (OpenCall& c : g.calls) {
    const uint64_t lo = std::max(from, c.entry_ts);
    if (!c.split.preempted_ns || to <= lo) continue;
    auto s = std::find_if(c.split.syscalls.begin(), c.split.syscalls.end(),
                          [&](const SyscallPart& p) { return p.name == name; });
    if (s == c.split.syscalls.end()) {
      c.split.syscalls.push_back({name, 0, 0});
      s = c.split.syscalls.end() - 1;
    }
    // Merged calls hold gaps between them: their own time, at most what the call saw.
    const uint64_t in = count > 1 ? std::min(ns, to - lo) : to - lo;
    s->ns += in;
    s->count += count;
    if (g.part == Part::Running) c.syscall_running += in;
  }
}

std::optional<WhySplit> WhyTracker::ret(uint64_t ts, int64_t goid, const std::string& func) {
  auto it = open_.find(goid);
  if (it == open_.end()) return std::nullopt;
  Goroutine& g = it->second;
  auto c = std::find_if(g.calls.rbegin(), g.calls.rend(),
                        [&](const OpenCall& o) { return o.func == func; });
  if (c == g.calls.rend()) return std::nullopt;
  // The stretch since the last change, up to the return, as it stands (clipped per call).
  credit(g, ts, nullptr);
  g.since = std::max(g.since, ts);
  const size_t idx = g.calls.size() - 1 - static_cast<size_t>(c - g.calls.rbegin());
  const OpenCall& call = g.calls[idx];
  WhySplit s = std::move(g.calls[idx].split);
  // The kernel's time, out of the Go parts it was credited to (clamped: the Go parts and the
  // kernel's intervals come from different clocks' reads, a few us apart).
  const uint64_t to_sys = std::min(s.running_ns, call.syscall_running);
  s.running_ns -= to_sys;
  s.syscall_ns += to_sys;
  s.running_ns -= std::min(s.running_ns, call.preempted_running);
  s.syscall_ns -= std::min(s.syscall_ns, call.preempted_syscall);
  g.calls.resize(idx);  // and the calls above it, which a panic unwound
  if (g.calls.empty()) open_.erase(it);
  std::stable_sort(s.waits.begin(), s.waits.end(),
                   [](const WaitPart& a, const WaitPart& b) { return a.ns > b.ns; });
  std::stable_sort(s.syscalls.begin(), s.syscalls.end(),
                   [](const SyscallPart& a, const SyscallPart& b) { return a.ns > b.ns; });
  return s;
}

void WhyTracker::credit(Goroutine& g, uint64_t ts, const WokenBy* woken) {
  for (OpenCall& c : g.calls) {
    const uint64_t lo = std::max(g.since, c.entry_ts);
    if (ts <= lo) continue;
    const uint64_t ns = ts - lo;
    switch (g.part) {
      case Part::Running:
        c.split.running_ns += ns;
        break;
      case Part::Runnable:
        c.split.runnable_ns += ns;
        break;
      case Part::Syscall:
        c.split.syscall_ns += ns;
        break;
      case Part::Waiting: {
        c.split.waiting_ns += ns;
        // A wait is credited whole when it ends: the waker is known then.
        if (!woken) break;
        auto w = std::find_if(c.split.waits.begin(), c.split.waits.end(), [&](const WaitPart& p) {
          return p.reason == g.reason && p.woken_by == *woken && p.parked_at == g.parked_at;
        });
        if (w == c.split.waits.end()) {
          c.split.waits.push_back({g.reason, 0, 0, *woken, g.parked_at});
          w = c.split.waits.end() - 1;
        }
        w->ns += ns;
        ++w->count;
        break;
      }
      case Part::Other:
        break;
    }
  }
}

WokenBy WhyTracker::waker(int tid, int64_t woken, const std::string& reason,
                          const Seen& seen) const {
  // The runtime readies a goroutine on the thread of the one that releases it (chansend,
  // semrelease, ...), still running there. A thread running no goroutine is the scheduler's:
  // its network poll, or a timer it ran.
  WokenBy w;
  if (seen.waker_goid) {
    // The backend read the thread's goroutine (m.curg) and its stack at the wake-up.
    if (*seen.waker_goid && *seen.waker_goid != woken) {
      w.kind = WokenBy::Goroutine;
      w.goid = *seen.waker_goid;
      w.func = seen.waker_func;
      if (w.func.empty())
        if (auto n = names_.find(w.goid); n != names_.end()) w.func = n->second;
      return w;
    }
    if (!*seen.waker_goid) {
      w.kind = reason == "IO wait" ? WokenBy::Netpoll : WokenBy::Timer;
      return w;
    }
  }
  auto r = running_on_.find(tid);
  if (r != running_on_.end() && r->second != woken) {
    w.kind = WokenBy::Goroutine;
    w.goid = r->second;
    if (auto n = names_.find(r->second); n != names_.end()) w.func = n->second;
    return w;
  }
  if (r != running_on_.end()) return w;  // itself: not a wake-up gotap can explain
  w.kind = reason == "IO wait" ? WokenBy::Netpoll : WokenBy::Timer;
  return w;
}

void WhyTracker::state(uint64_t ts, int tid, int64_t goid, const std::string& from,
                       const std::string& to, const std::string& reason, const Seen& seen) {
  const Part was = part_of(from), now = part_of(to);
  auto it = open_.find(goid);
  if (it != open_.end()) {
    Goroutine& g = it->second;
    WokenBy woken;
    if (g.part == Part::Waiting) woken = waker(tid, goid, g.reason, seen);
    // The state gotap saw last is the one to credit (its own `from` says the same when no
    // change was missed).
    if (ts > g.since) {
      credit(g, ts, g.part == Part::Waiting ? &woken : nullptr);
      g.since = ts;
    }
    g.part = now;
    g.reason = now == Part::Waiting ? reason : "";
    g.parked_at = now == Part::Waiting ? seen.parked_at : "";
  }
  if (was == Part::Running) {
    auto r = running_on_.find(tid);
    if (r != running_on_.end() && r->second == goid) running_on_.erase(r);
  }
  if (now == Part::Running) running_on_[tid] = goid;
}

void WhyTracker::named(int64_t goid, const std::string& func) {
  if (!func.empty()) names_[goid] = func;
}

void WhyTracker::exited(int64_t goid) {
  names_.erase(goid);
  open_.erase(goid);
}

namespace {

Event woken_json(const WokenBy& w) {
  switch (w.kind) {
    case WokenBy::Goroutine: {
      Event e = {{"goid", w.goid}};
      e["func"] = w.func.empty() ? Event() : Event(w.func);
      return e;
    }
    case WokenBy::Netpoll:
      return {{"by", "netpoll"}};
    case WokenBy::Timer:
      return {{"by", "timer"}};
    case WokenBy::Unknown:
      break;
  }
  return Event();
}

std::string ms(uint64_t ns) {
  if (ns < 50'000) return fmt::format("{} us", (ns + 500) / 1000);
  return fmt::format("{:.1f} ms", double(ns) / 1e6);
}

// A record's why is read back by `gotap report`: any JSON, so every field is checked.
std::string woken_text(const Event& w) {
  if (!w.is_object()) return "";
  if (const auto by = w.find("by"); by != w.end())
    return !by->is_string()   ? ""
           : *by == "netpoll" ? "woken by the network poller"
                              : "woken by a " + by->get<std::string>();
  const auto f = w.find("func");
  const auto g = w.find("goid");
  // latency --why's totals leave the goid out: each call's waker may differ.
  const bool has_g = g != w.end() && g->is_number_integer();
  return fmt::format("woken by {}{}", f != w.end() && f->is_string() ? f->get<std::string>() : "?",
                     has_g ? " [g " + g->dump() + "]" : "");
}

uint64_t num(const Event& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

// latency --why's totals carry shares: " 68%", else "".
std::string pct(const Event& shares, const char* key) {
  if (!shares.is_object()) return "";
  const auto it = shares.find(key);
  if (it == shares.end() || !it->is_number()) return "";
  const double v = it->get<double>() * 100;
  return v > 0 && v < 0.5 ? " <1%" : fmt::format(" {:.0f}%", v);
}

}  // namespace

Event why_json(const WhySplit& s) {
  Event e = {{"running_ns", s.running_ns},
             {"preempted_ns", s.preempted_ns ? Event(*s.preempted_ns) : Event()},
             {"runnable_ns", s.runnable_ns},
             {"syscall_ns", s.syscall_ns},
             {"waiting_ns", s.waiting_ns}};
  Event waits = Event::array();
  for (const WaitPart& w : s.waits) {
    Event j = {{"reason", w.reason.empty() ? Event() : Event(w.reason)},
               {"ns", w.ns},
               {"count", w.count},
               {"parked_at", w.parked_at.empty() ? Event() : Event(w.parked_at)},
               {"woken_by", woken_json(w.woken_by)}};
    waits.push_back(std::move(j));
  }
  e["waits"] = std::move(waits);
  if (s.syscalls_named) {
    Event calls = Event::array();
    for (const SyscallPart& c : s.syscalls)
      calls.push_back({{"name", c.name}, {"ns", c.ns}, {"count", c.count}});
    e["syscalls"] = std::move(calls);
  } else {
    e["syscalls"] = nullptr;
  }
  return e;
}

std::string why_text(const Event& why) {
  struct Item {
    uint64_t ns;
    std::string text;
  };
  std::vector<Item> items;
  if (!why.is_object()) return "";
  const Event shares = why.value("shares", Event());
  if (uint64_t waiting = num(why, "waiting_ns")) {
    std::string detail;
    const auto waits = why.find("waits");
    const bool several = waits != why.end() && waits->is_array() && waits->size() > 1;
    if (waits != why.end() && waits->is_array())
      for (const Event& w : *waits) {
        if (!w.is_object()) continue;
        if (!detail.empty()) detail += "; ";
        const auto r = w.find("reason");
        detail += r != w.end() && r->is_string() ? r->get<std::string>() : "unknown reason";
        if (several) detail += " " + ms(num(w, "ns")) + pct(w, "share");
        const auto p = w.find("parked_at");
        if (p != w.end() && p->is_string()) detail += " at " + p->get<std::string>();
        if (const auto b = w.find("woken_by"); b != w.end())
          if (std::string by = woken_text(*b); !by.empty()) detail += ", " + by;
      }
    items.push_back({waiting, "waiting " + ms(waiting) + pct(shares, "waiting") +
                                  (detail.empty() ? "" : " (" + detail + ")")});
  }
  for (auto [key, name] :
       {std::pair{"running_ns", "running"}, std::pair{"preempted_ns", "preempted"},
        std::pair{"runnable_ns", "runnable"}})
    if (uint64_t ns = num(why, key))
      items.push_back({ns, std::string(name) + " " + ms(ns) + pct(shares, name)});
  if (uint64_t ns = num(why, "syscall_ns")) {
    // The largest system calls by name, as the kernel saw them.
    std::string names;
    const auto calls = why.find("syscalls");
    if (calls != why.end() && calls->is_array())
      for (const Event& c : *calls) {
        const auto n = c.is_object() ? c.find("name") : c.end();
        if (!c.is_object() || n == c.end() || !n->is_string()) continue;
        if (names.size() > 40) {
          names += ", ...";
          break;
        }
        names += (names.empty() ? "" : ", ") + n->get<std::string>();
      }
    items.push_back({ns, "syscall " + ms(ns) + pct(shares, "syscall") +
                             (names.empty() ? "" : " (" + names + ")")});
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.ns > b.ns; });
  std::string line;
  for (const Item& i : items) line += (line.empty() ? "" : " · ") + i.text;
  return line.empty() ? "no time measured" : line;
}

}  // namespace gotap::why
