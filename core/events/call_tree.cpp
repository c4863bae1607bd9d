#include "core/events/call_tree.h"

#include <algorithm>

namespace gotap {

namespace {

OffCpu off_cpu_of(const std::string& to) {
  // As core/why counts them: preempted is a goroutine suspended for the GC, waiting for the
  // scheduler as a runnable one does.
  if (to == "waiting" || to == "leaked") return OffCpu::Waiting;
  if (to == "runnable" || to == "preempted") return OffCpu::Runnable;
  if (to == "syscall") return OffCpu::Syscall;
  return OffCpu::None;
}

// The waker a status change carries (--why): a record's event may hold anything.
std::optional<Waker> waker_of(const Event& ev) {
  const auto w = ev.find("woken_by");
  if (w == ev.end() || !w->is_object()) return std::nullopt;
  const auto g = w->find("goid");
  if (g == w->end() || !g->is_number_integer()) return std::nullopt;
  Waker k{g->get<int64_t>(), ""};
  if (const auto f = w->find("func"); f != w->end() && f->is_string()) k.func = *f;
  return k;
}

}  // namespace

std::string off_cpu_name(OffCpu kind, const std::string& detail) {
  switch (kind) {
    case OffCpu::Waiting:
      return detail.empty() ? "(waiting)" : "(waiting: " + detail + ")";
    case OffCpu::Runnable:
      return "(runnable)";
    case OffCpu::Syscall:
      return detail.empty() ? "(syscall)" : "(syscall " + detail + ")";
    case OffCpu::Preempted:
      return "(preempted)";
    case OffCpu::None:
      break;
  }
  return "";
}

void CallTree::add(const Event& ev) {
  const std::string kind = ev.value("event", "");
  if (kind == "kwhy") return kernel_interval(ev);
  if (kind != "entry" && kind != "return" && kind != "unfinished" && kind != "gstate") return;
  // No goid (gccgo): a goroutine does not leave its thread inside a leaf call, so calls nest
  // per thread, which a negative key keeps apart from goroutines.
  const int64_t goid =
      ev.contains("goid") ? ev.value("goid", int64_t{0}) : -ev.value("tid", int64_t{0});
  const uint64_t ts = ev.value("ts_ns", uint64_t{0});
  last_ts_ = std::max(last_ts_, ts);
  // A goroutine's state changes only matter while it has a traced call open.
  if (kind == "gstate" && !open_.count(goid)) return;
  auto& stack = open_[goid];
  auto names = [&] {
    std::vector<std::string> v;
    for (const auto& s : stack) v.push_back(s.func);
    return v;
  };
  // A stretch off the CPU ends with the goroutine's next status change (it cannot call or
  // return before). A wait's end says who ended it.
  if (!stack.empty() && stack.back().wait) {
    CallSpan s = std::move(stack.back());
    stack.pop_back();
    s.end_ns = std::max(ts, s.start_ns);
    if (kind == "gstate" && s.off_cpu == OffCpu::Waiting) s.woken_by = waker_of(ev);
    done_.push_back(std::move(s));
  }
  if (kind == "gstate") {
    if (stack.empty()) return;
    const OffCpu part = off_cpu_of(ev.value("to", ""));
    // Only waits without --why, as before it.
    if (part == OffCpu::None || (part != OffCpu::Waiting && !opts_.why)) return;
    CallSpan s;
    s.goid = goid;
    s.start_ns = s.end_ns = ts;
    s.stack = names();
    s.wait = true;
    s.off_cpu = part;
    if (part == OffCpu::Waiting) {
      s.detail = ev.value("reason", "");
      if (const auto p = ev.find("parked_at"); p != ev.end() && p->is_string()) s.parked_at = *p;
    }
    if (part == OffCpu::Runnable) s.woken_by = waker_of(ev);
    s.func = off_cpu_name(part, s.detail);
    stack.push_back(std::move(s));
    return;
  }
  const std::string func = ev.value("func", "");
  if (kind == "entry") {
    CallSpan s{goid,    func,
               ts,      ts,
               true,    ev.value("inlined", false),
               names(), ev.contains("args") ? ev["args"] : Event()};
    if (s.instant)
      done_.push_back(std::move(s));
    else
      stack.push_back(std::move(s));
    return;
  }
  // A return closes the innermost open call of that function on its goroutine; calls above
  // it that never returned (a panic unwound them) end there too, unfinished.
  auto it =
      std::find_if(stack.rbegin(), stack.rend(), [&](const CallSpan& s) { return s.func == func; });
  if (it == stack.rend()) return;  // its entry came before the trace started
  size_t idx = stack.size() - 1 - static_cast<size_t>(it - stack.rbegin());
  while (stack.size() > idx) {
    CallSpan s = std::move(stack.back());
    stack.pop_back();
    s.end_ns = ts;
    s.finished = kind == "return" && stack.size() == idx;
    done_.push_back(std::move(s));
  }
}

void CallTree::kernel_interval(const Event& ev) {
  if (!opts_.why) return;
  const auto get = [&](const char* key) {
    const auto it = ev.find(key);
    return it != ev.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
  };
  const auto str = [&](const char* key) {
    const auto it = ev.find(key);
    return it != ev.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const int64_t goid = ev.value("goid", int64_t{0});
  const std::string kind = str("kind");
  const uint64_t to = get("ts_ns");
  auto it = open_.find(goid);
  if (it == open_.end() || it->second.empty() || (kind != "syscall" && kind != "preempted")) return;
  auto& stack = it->second;
  last_ts_ = std::max(last_ts_, to);
  // Inside Go's own system-call state, the kernel's call names that stretch (the longest,
  // when Go's stretch holds several).
  if (stack.back().wait) {
    CallSpan& go = stack.back();
    if (kind == "syscall" && go.off_cpu == OffCpu::Syscall && to - get("from_ns") > go.named_by) {
      go.named_by = to - get("from_ns");
      go.detail = str("name");
      go.func = off_cpu_name(OffCpu::Syscall, go.detail);
    }
    return;  // other overlaps would not nest
  }
  // Else the goroutine was running to Go: a system call Go does not wrap, or its thread taken
  // off the CPU. A stretch of its own beneath the innermost call, clipped to it.
  CallSpan s;
  s.goid = goid;
  s.start_ns = std::min(std::max(get("from_ns"), stack.back().start_ns), to);
  s.end_ns = to;
  for (const auto& c : stack) s.stack.push_back(c.func);
  s.wait = true;
  s.off_cpu = kind == "syscall" ? OffCpu::Syscall : OffCpu::Preempted;
  s.detail = kind == "syscall" ? str("name") : "";
  s.func = off_cpu_name(s.off_cpu, s.detail);
  done_.push_back(std::move(s));
}

std::vector<CallSpan> CallTree::finish(uint64_t end_ns) {
  if (!end_ns) end_ns = last_ts_;
  for (auto& [goid, stack] : open_) {
    while (!stack.empty()) {
      CallSpan s = std::move(stack.back());
      stack.pop_back();
      s.end_ns = std::max(end_ns, s.start_ns);
      s.finished = false;
      done_.push_back(std::move(s));
    }
  }
  std::vector<CallSpan> out = std::move(done_);
  done_.clear();
  std::stable_sort(out.begin(), out.end(), [](const CallSpan& a, const CallSpan& b) {
    if (a.goid != b.goid) return a.goid < b.goid;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.stack.size() < b.stack.size();  // the outer call first
  });
  return out;
}

}  // namespace gotap
