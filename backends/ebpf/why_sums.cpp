#include "backends/ebpf/why_sums.h"

#include <algorithm>

#include "backends/ebpf/aggregates.h"
#include "core/binary/pclntab.h"
#include "core/events/goroutine_events.h"
#include "core/why/syscall_names.h"
#include "core/why/why_latency.h"
#include "core/why/why_tracker.h"

namespace gotap::ebpf {

namespace {

why::WokenBy woken(const gotap_why_wait_key& k, const std::string& reason, const WhyNames& n) {
  why::WokenBy w;
  if (k.waker == GOTAP_WAKER_GOROUTINE) {
    w.kind = why::WokenBy::Goroutine;
    if (k.waker_pc) w.func = n.func_of(k.waker_pc - 1);
  } else if (k.waker == GOTAP_WAKER_SCHEDULER) {
    // The scheduler's own thread: its network poll, or a timer (why_tracker.cpp, waker).
    w.kind = reason == "IO wait" ? why::WokenBy::Netpoll : why::WokenBy::Timer;
  }
  return w;
}

Event bucket_why(const WhyBucket& b, const WhyNames& n) {
  why::WhySplit s;
  s.running_ns = b.parts.running_ns;
  s.runnable_ns = b.parts.runnable_ns;
  s.syscall_ns = b.parts.syscall_ns;
  s.waiting_ns = b.parts.waiting_ns;
  if (n.preempted_measured) s.preempted_ns = b.parts.preempted_ns;
  s.syscalls_named = n.syscalls_named;
  if (n.syscalls_named)
    for (const auto& [nr, sum] : b.syscalls)
      s.syscalls.push_back({why::syscall_name(nr), sum.ns, sum.count});
  for (const auto& [k, sum] : b.waits) {
    why::WaitPart w;
    // 0 is waitReasonZero, which names nothing (goroutine_events.cpp).
    if (k.reason != GOTAP_WHY_NO_REASON && k.reason > 0 && k.reason < n.wait_reasons.size())
      w.reason = n.wait_reasons[k.reason];
    w.ns = sum.ns;
    w.count = sum.count;
    w.woken_by = woken(k, w.reason, n);
    if (k.parked_pc) w.parked_at = n.func_of(k.parked_pc - 1);
    s.waits.push_back(std::move(w));
  }
  return why::why_json(s);
}

// The buckets' splits added up (add_why counts each as one call: the calls are set after).
Event total_of(const std::vector<const WhyBucket*>& buckets, const WhyNames& n) {
  Event total;
  uint64_t calls = 0;
  for (const WhyBucket* b : buckets) {
    why::add_why(total, bucket_why(*b, n));
    calls += b->parts.calls;
  }
  if (!total.is_object()) return total;
  total["calls"] = calls;
  why::add_shares(total);
  return total;
}

}  // namespace

bool read_why_sums(int parts_fd, int waits_fd, int sys_fd, WhySums& out) {
  bool ok = for_each_entry<gotap_why_key, gotap_why_parts>(
      parts_fd, [&](const gotap_why_key& k, const gotap_why_parts& v) {
        out[k.func_id][k.bucket].parts = v;
      });
  ok &= for_each_entry<gotap_why_wait_key, gotap_why_sum>(
      waits_fd, [&](const gotap_why_wait_key& k, const gotap_why_sum& v) {
        out[k.func_id][k.bucket].waits.emplace_back(k, v);
      });
  ok &= for_each_entry<gotap_why_sys_key, gotap_why_sum>(
      sys_fd, [&](const gotap_why_sys_key& k, const gotap_why_sum& v) {
        out[k.func_id][k.bucket].syscalls.emplace_back(k.nr, v);
      });
  return ok;
}

std::pair<Event, Event> why_of(const std::map<uint32_t, WhyBucket>& buckets,
                               const WhyNames& names) {
  std::vector<const WhyBucket*> all;
  uint64_t calls = 0;
  for (const auto& [bucket, b] : buckets) {
    if (!b.parts.calls) continue;  // a wait or system call whose call's parts found no room
    all.push_back(&b);
    calls += b.parts.calls;
  }
  if (all.empty()) return {Event(), Event()};
  // The slowest 1% (at least one call): whole buckets from the top.
  const uint64_t want = std::max<uint64_t>(1, (calls + 99) / 100);
  std::vector<const WhyBucket*> slow;
  uint64_t got = 0;
  for (auto it = all.rbegin(); it != all.rend() && got < want; ++it) {
    slow.push_back(*it);
    got += (*it)->parts.calls;
  }
  return {total_of(all, names), total_of(slow, names)};
}

std::vector<gotap_why_range> why_keep_ranges(const Pclntab& pcln, uint64_t bias) {
  std::vector<gotap_why_range> out;
  for (const PclnFunc& f : pcln.all_funcs()) {
    if (f.end <= f.entry) continue;
    if (first_user_frame({std::string(f.name)}).empty()) continue;
    if (!out.empty() && out.back().hi == f.entry + bias)
      out.back().hi = f.end + bias;
    else
      out.push_back({f.entry + bias, f.end + bias});
  }
  return out;
}

}  // namespace gotap::ebpf
