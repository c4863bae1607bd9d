#include "core/why/why_sink.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "core/events/overhead_budget.h"
#include "core/events/typed_events.h"
#include "core/why/syscall_names.h"
#include "core/why/why_tracker.h"

namespace gotap::why {

namespace {

class WhySink : public EventSink {
 public:
  WhySink(std::unique_ptr<EventSink> next, WhyOptions opts)
      : next_(std::move(next)), pass_(opts.pass_goroutine_events), opts_(opts) {}

  void emit(const Event& ev) override {
    const auto kind = ev.find("event");
    if (kind != ev.end() && kind->is_string()) {
      const std::string& k = kind->get_ref<const std::string&>();
      // The kernel's intervals (eBPF: a system call by name, a thread off the CPU) are drawn
      // by the views too, inside traced calls.
      if (k == "kwhy") {
        const int64_t goid = ev.value("goid", int64_t{0});
        const bool inside = tracker_.inside_call(goid);
        if (opts_.entries_held) remember(k, goid, ev);
        kernel_interval(ev);
        if (inside)
          for (EventSink* s : opts_.call_states_to) s->emit(ev);
        return;
      }
      if (k == "gstate" || k == "gcreate" || k == "gexit") {
        // Whether it happened inside a traced call: after a wake-up the goroutine is still
        // inside, and before its entry it was not.
        const int64_t goid = ev.value("goid", int64_t{0});
        const bool inside = k == "gstate" && tracker_.inside_call(goid);
        if (opts_.entries_held) remember(k, goid, ev);
        goroutine_event(k, ev);
        if (pass_)
          next_->emit(ev);
        else if (inside)
          for (EventSink* s : opts_.call_states_to) s->emit(ev);
        return;
      }
      if (k == "entry" || k == "return") {
        // A call event as JSON (a sink that builds them itself): the typed path's work.
        if (k == "entry" && !ev.value("inlined", false)) {
          const int64_t goid = ev.value("goid", int64_t{0});
          const uint64_t ts = ev.value("ts_ns", uint64_t{0});
          tracker_.entry(ts, goid, ev.value("func", ""));
          next_->emit(ev);
          replay(goid, ts);
          return;
        }
        if (k == "return") {
          auto s = tracker_.ret(ev.value("ts_ns", uint64_t{0}), ev.value("goid", int64_t{0}),
                                ev.value("func", ""));
          if (s && blind_) {
            Event out = ev;
            out["why"] = nullptr;
            next_->emit(out);
            return;
          }
          if (s) {
            Event out = ev;
            adjust(*s, ev.contains("duration_ns") ? ev["duration_ns"].get<uint64_t>() : 0,
                   ev.contains("wall_ns") ? ev["wall_ns"].get<uint64_t>() : 0);
            out["why"] = json(*s);
            next_->emit(out);
            return;
          }
        }
      }
      if (k == "detached" && ev.value("func", "") == kGoroutineProbes) blind_ = true;
      if (k == "summary") {
        Event out = ev;
        // What `why` leaves null or out, and why (docs/json.md).
        Event un = Event::object();
        if (!kernel_)
          un["preempted_ns"] =
              "not measured: needs the kernel's scheduler tracepoint, which BPF could not "
              "attach";
        if (!kernel_syscalls_)
          un["syscalls"] =
              "not measured: needs the kernel's system-call tracepoints, which BPF could not "
              "attach; syscall_ns is the time in system calls of every kind";
        if (!opts_.syscalls_seen && !kernel_syscalls_)
          un["syscall_ns"] =
              "this Go release enters system calls without runtime.casgstatus: their time "
              "counts as running";
        if (blind_)
          un["why"] =
              "--max-overhead detached the goroutine probes: calls that returned after that "
              "have why null";
        out["why_unmeasured"] = std::move(un);
        next_->emit(out);
        return;
      }
    }
    next_->emit(ev);
  }
  void emit_entry(const CallEntry& e) override {
    if (!e.inlined) tracker_.entry(e.ts_ns, e.goid, e.func);
    next_->emit_entry(e);
    if (!e.inlined) replay(e.goid, e.ts_ns);
  }
  void emit_return(const CallReturn& r) override {
    auto s = tracker_.ret(r.ts_ns, r.goid, r.func);
    if (!s || !r.duration_ns) return next_->emit_return(r);
    CallReturn out = r;
    if (blind_) {
      out.why = Event();  // its split would miss the changes since
      return next_->emit_return(out);
    }
    adjust(*s, *r.duration_ns, r.wall_ns.value_or(0));
    out.why = json(*s);
    next_->emit_return(out);
  }
  void emit_unfinished(const CallUnfinished& u) override { next_->emit_unfinished(u); }
  void flush() override { next_->flush(); }

 private:
  // A goroutine's status changes (and the kernel's intervals) while no call of it is known
  // to be open: a held entry may yet show that one was.
  void remember(const std::string& k, int64_t goid, const Event& ev) {
    if (k == "gexit") {
      recent_.erase(goid);
      return;
    }
    if ((k != "gstate" && k != "kwhy") || tracker_.inside_call(goid)) return;
    auto& h = recent_[goid];
    const uint64_t ts = ev.value("ts_ns", uint64_t{0});
    h.push_back({ev, false});
    while (h.size() > kHeldHistory ||
           (h.front().ev.value("ts_ns", uint64_t{0}) + kHeldHistoryNs < ts))
      h.pop_front();
  }
  // A call entered at ts on goid, told only now: its goroutine's changes since then are the
  // call's, and the views and the record get those they did not get yet, after its entry.
  void replay(int64_t goid, uint64_t ts) {
    if (!opts_.entries_held) return;
    auto it = recent_.find(goid);
    if (it == recent_.end()) return;
    for (Change& c : it->second) {
      if (c.ev.value("ts_ns", uint64_t{0}) <= ts) continue;
      // The kernel's intervals end at ts_ns, and are clipped to the call where credited.
      const bool kernel = c.ev.value("event", "") == "kwhy";
      if (kernel)
        kernel_interval(c.ev);
      else
        goroutine_event("gstate", c.ev);
      if (c.forwarded) continue;
      c.forwarded = true;
      if (pass_) {
        // The views saw it go by, outside every call; the record keeps it where it was.
        Event again = c.ev;
        again["replayed"] = true;
        for (EventSink* s : opts_.replays_to) s->emit(again);
        continue;
      }
      // The kernel's intervals never go on to next_.
      for (EventSink* s : opts_.call_states_to) s->emit(c.ev);
    }
  }

  void goroutine_event(const std::string& k, const Event& ev) {
    const int64_t goid = ev.value("goid", int64_t{0});
    if (k == "gexit") return tracker_.exited(goid);
    // Its start function: at its creation, or the first time it shows up.
    if (ev.contains("func") && ev["func"].is_string()) tracker_.named(goid, ev["func"]);
    if (k != "gstate") return;
    WhyTracker::Seen seen;
    if (auto p = ev.find("parked_at"); p != ev.end() && p->is_string()) seen.parked_at = *p;
    if (auto w = ev.find("woken_by"); w != ev.end() && w->is_object()) {
      seen.waker_goid = w->value("goid", int64_t{0});
      seen.waker_func = w->value("func", "");
    }
    tracker_.state(ev.value("ts_ns", uint64_t{0}), ev.value("tid", 0), goid, ev.value("from", ""),
                   ev.value("to", ""), ev.value("reason", ""), seen);
  }
  // The kernel's intervals of a goroutine (eBPF's `kwhy` events: a system call by name, its
  // thread off the CPU), credited to its open calls; the views draw them too.
  void kernel_interval(const Event& ev) {
    const std::string kind = ev.value("kind", "");
    if (kind == "start") {
      kernel_ = true;
      kernel_syscalls_ = ev.value("syscalls", true);
      tracker_.kernel_seen(kernel_syscalls_);
      return;
    }
    const uint64_t from = ev.value("from_ns", uint64_t{0}), to = ev.value("ts_ns", uint64_t{0});
    const int64_t goid = ev.value("goid", int64_t{0});
    if (kind == "preempted") tracker_.preempted(from, to, goid);
    if (kind == "syscall")
      tracker_.syscall(from, to, goid, ev.value("name", ""), ev.value("count", uint32_t{1}),
                       ev.value("ns", uint64_t{0}));
  }
  Event json(const WhySplit& s) const {
    Event j = why_json(s);
    // Without entersyscall's probes, the kernel's system calls are syscall_ns (why_tracker.h).
    if (!opts_.syscalls_seen && !s.syscalls_named) j["syscall_ns"] = nullptr;
    return j;
  }
  // ptrace leaves out of duration_ns the time gotap held the goroutine stopped at its probes
  // (wall_ns keeps it): that time was spent at a probe, on the goroutine, so it comes off
  // running_ns, and the parts still sum to duration_ns. A hold at entersyscall's and
  // exitsyscall's probes is inside Go's system-call state: what running_ns lacks comes off
  // syscall_ns (then the others), never below the system calls the kernel timed.
  static void adjust(WhySplit& s, uint64_t duration, uint64_t wall) {
    if (!wall || wall <= duration) return;
    uint64_t held = wall - duration;
    uint64_t named = 0;
    for (const SyscallPart& c : s.syscalls) named += c.ns;
    const auto take = [&held](uint64_t& part, uint64_t keep) {
      const uint64_t n = part > keep ? std::min(held, part - keep) : 0;
      part -= n;
      held -= n;
    };
    take(s.running_ns, 0);
    take(s.syscall_ns, named);
    take(s.runnable_ns, 0);
    take(s.waiting_ns, 0);
  }

  std::unique_ptr<EventSink> next_;
  bool pass_;
  WhyOptions opts_;
  WhyTracker tracker_;
  bool kernel_ = false;
  bool kernel_syscalls_ = false;
  bool blind_ = false;  // --max-overhead detached the goroutine probes
  struct Change {
    Event ev;
    bool forwarded;  // to call_states_to, for a call entered before it
  };
  std::unordered_map<int64_t, std::deque<Change>> recent_;
};

}  // namespace

Event kernel_start_event(bool syscalls) {
  return {{"event", "kwhy"}, {"kind", "start"}, {"syscalls", syscalls}};
}

Event kernel_event(bool syscall, uint64_t from, uint64_t to, int tid, int64_t goid, uint64_t nr,
                   uint32_t count, uint64_t ns) {
  Event e = {{"event", "kwhy"}, {"kind", syscall ? "syscall" : "preempted"},
             {"from_ns", from}, {"ts_ns", to},
             {"tid", tid},      {"goid", goid}};
  if (syscall) e["name"] = syscall_name(nr);
  if (count > 1) {
    e["count"] = count;
    e["ns"] = ns;
  }
  return e;
}

std::unique_ptr<EventSink> make_why_sink(std::unique_ptr<EventSink> next, WhyOptions opts) {
  return std::make_unique<WhySink>(std::move(next), opts);
}

}  // namespace gotap::why
