#include "core/events/call_tree.h"

#include <algorithm>

namespace gotap {

void CallTree::add(const Event& ev) {
  const std::string kind = ev.value("event", "");
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
  // A wait ends with the goroutine's next status change (it cannot call or return before).
  if (!stack.empty() && stack.back().wait) {
    CallSpan s = std::move(stack.back());
    stack.pop_back();
    s.end_ns = std::max(ts, s.start_ns);
    done_.push_back(std::move(s));
  }
  if (kind == "gstate") {
    // Only waits inside traced calls: they tell where a call's time went.
    if (ev.value("to", "") != "waiting" || stack.empty()) return;
    const std::string reason = ev.value("reason", "");
    CallSpan s{goid,    reason.empty() ? "(waiting)" : "(waiting: " + reason + ")",
               ts,      ts,
               true,    false,
               names(), Event()};
    s.wait = true;
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
