#include "core/events/goroutine_events.h"

#include <cstring>

#include <fmt/format.h>

#include "core/events/typed_events.h"

namespace gotap {

std::string gstatus_name(uint32_t s) {
  switch (s) {
    case kGIdle:
      return "idle";
    case kGRunnable:
      return "runnable";
    case kGRunning:
      return "running";
    case kGSyscall:
      return "syscall";
    case kGWaiting:
      return "waiting";
    case kGDead:
      return "dead";
    case kGCopystack:
      return "copystack";
    case kGPreempted:
      return "preempted";
    case kGLeaked:
      return "leaked";
    case kGDeadExtra:
      return "deadextra";
    default:
      return fmt::format("status_{}", s);
  }
}

OriginSpan origin_span(const RuntimeOffsets& o) {
  if (!o.g_gopc || !o.g_startpc || o.g_startpc < o.g_gopc) return {};
  uint32_t lo = o.g_parent_goid && o.g_parent_goid < o.g_gopc ? o.g_parent_goid : o.g_gopc;
  return {lo, o.g_startpc + 8 - lo};
}

std::optional<GoroutineOrigin> parse_origin(const RuntimeOffsets& o, const uint8_t* bytes,
                                            size_t n) {
  const OriginSpan span = origin_span(o);
  if (!span.size || n < span.size) return std::nullopt;
  auto word = [&](uint32_t off) {
    uint64_t v = 0;
    std::memcpy(&v, bytes + (off - span.offset), 8);
    return v;
  };
  GoroutineOrigin g;
  g.has_parent = o.g_parent_goid && o.g_parent_goid == span.offset;
  if (g.has_parent) g.parent_goid = word(o.g_parent_goid);
  g.gopc = word(o.g_gopc);
  g.startpc = word(o.g_startpc);
  return g;
}

GoroutineEvents::GoroutineEvents(EventSink& sink, int pid,
                                 std::function<std::string(uint64_t)> func_of,
                                 std::vector<std::string> wait_reasons, bool reason_from_park_only)
    : sink_(sink),
      pid_(pid),
      func_of_(std::move(func_of)),
      wait_reasons_(std::move(wait_reasons)),
      reason_from_park_only_(reason_from_park_only) {}

void GoroutineEvents::emit(const Event& ev) {
  ++events_;
  sink_.emit(ev);
}

void GoroutineEvents::on_create(uint64_t ts, int tid, uint64_t parent_goid, uint64_t start_pc,
                                uint64_t caller_pc) {
  Creation c;
  c.ts = ts;
  c.parent_goid = parent_goid;
  c.start_pc = start_pc;
  c.caller_pc = caller_pc;
  creating_[tid] = c;
}

std::string first_user_frame(const std::vector<std::string>& funcs) {
  for (const std::string& f : funcs) {
    if (f.empty() || f.starts_with("runtime.") || f.starts_with("runtime/") ||
        f.starts_with("sync.") || f.starts_with("sync/") || f.starts_with("internal/"))
      continue;
    return f;
  }
  return "";
}

void GoroutineEvents::on_status(uint64_t ts, int tid, uint64_t goid, uint32_t from, uint32_t to,
                                int wait_reason, const GoroutineOrigin* origin, uint64_t caller_pc,
                                const StatusStacks* stacks) {
  if (to == kGWaiting && wait_reason >= 0 && reason_from_park_only_ &&
      (!caller_pc || func_of_(caller_pc - 1) != "runtime.park_m"))
    wait_reason = -1;
  // idle -> dead is a fresh g joining the free list; dead (or Go 1.26's deadextra) <->
  // syscall is a cgo callback borrowing an extra M's g. Neither is a goroutine starting or
  // ending.
  if (from == kGIdle || to == kGIdle) return;
  // No change: libgo's syscall -> exiting syscall, once the backend named both a system call
  // (libgo_status).
  if (from == to) return;
  if (from == kGDead) {
    auto it = creating_.find(tid);
    if (it != creating_.end() && !it->second.status_seen) {
      // Up to Go 1.23 the goid is assigned after this change: wait for newproc1's return.
      it->second.status_seen = true;
      it->second.status_ts = ts;
      it->second.from = from;
      it->second.to = to;
      it->second.reason = wait_reason;
      return;
    }
    // A creation whose newproc1 entry gotap did not see (it began before the attach): up to
    // Go 1.23 gp still holds its previous life's goid. The goroutine shows up at its next
    // change instead, with its origin.
    if (to == kGRunnable || to == kGWaiting) return;
  }
  emit_status(ts, tid, goid, from, to, wait_reason, origin, stacks);
}

void GoroutineEvents::on_created(uint64_t ts, int tid, uint64_t goid) {
  auto it = creating_.find(tid);
  if (it == creating_.end()) return;
  const Creation c = it->second;
  creating_.erase(it);
  GoroutineCreate ev{c.status_seen ? c.status_ts : ts, pid_, tid, goid, {}};
  ev.source.parent_goid = c.parent_goid;
  ev.source.func = func_of_(c.start_pc);
  // The return address: the call instruction before it is in the function with the go
  // statement.
  if (c.caller_pc) ev.source.created_by = func_of_(c.caller_pc - 1);
  known_.insert(goid);
  emit(to_event(ev));
  if (c.status_seen) emit_status(c.status_ts, tid, goid, c.from, c.to, c.reason, nullptr);
}

void GoroutineEvents::emit_status(uint64_t ts, int tid, uint64_t goid, uint32_t from, uint32_t to,
                                  int reason, const GoroutineOrigin* origin,
                                  const StatusStacks* stacks) {
  GoroutineState ev{ts, pid_, tid, goid, gstatus_name(from), gstatus_name(to), "", {}};
  if (stacks) {
    std::vector<std::string> funcs;
    // Return addresses: the call is the instruction before.
    for (uint64_t pc : stacks->pcs) funcs.push_back(pc ? func_of_(pc - 1) : std::string());
    std::string frame = first_user_frame(funcs);
    if (to == kGWaiting) {
      ev.parked_at = std::move(frame);
    } else if (stacks->waker_goid) {
      ev.waker_goid = stacks->waker_goid;
      ev.waker_func = std::move(frame);
    }
  }
  // Why it waits. The runtime sets g.waitreason before it parks a goroutine, and leaves it
  // alone otherwise, so it means something only on the way to waiting.
  if (to == kGWaiting && reason > 0 && size_t(reason) < wait_reasons_.size())
    ev.reason = wait_reasons_[size_t(reason)];
  // The first sight of a goroutine created before the trace: say where it came from.
  if (known_.insert(goid).second && origin) {
    GoroutineSource src;
    if (origin->has_parent) src.parent_goid = origin->parent_goid;
    if (origin->startpc) src.func = func_of_(origin->startpc);
    if (origin->gopc) src.created_by = func_of_(origin->gopc - 1);
    ev.source = src;
  }
  emit(to_event(ev));
  // syscall -> dead is a cgo callback's borrowed g going back to its extra M (Go <= 1.25),
  // not a goroutine ending; goroutines end running (goexit0, gdestroy).
  if (to == kGDead && from != kGSyscall) {
    known_.erase(goid);  // goids are never reused
    emit(to_event(GoroutineExit{ts, pid_, goid}));
  }
}

}  // namespace gotap
