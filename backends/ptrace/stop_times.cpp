#include "backends/ptrace/stop_times.h"

#include <cstdarg>
#include <cstdlib>
#include <cstring>

#ifdef GOTAP_PTRACE_STOP_BPF
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ptrace_stops.h"
#include "ptrace_stops.skel.h"
#endif

#include "core/sys/timing.h"
#include "core/why/why_threads.h"

namespace gotap::ptrace {

#ifdef GOTAP_PTRACE_STOP_BPF

struct StopTimes::Impl {
  ptrace_stops_bpf* skel = nullptr;
  int map_fd = -1;
  bool syscalls = false;  // opened with room for them (StopTimes::open)
};

namespace {

// A kernel or a user that cannot load it is not an error: the schedstat clock serves. Its
// messages would only say so, on a trace's stderr.
int quiet(enum libbpf_print_level, const char*, va_list) {
  return 0;
}

}  // namespace

std::unique_ptr<StopTimes> StopTimes::open(bool syscalls) {
  if (const char* e = getenv("GOTAP_PTRACE_STOP_BPF"); e && strcmp(e, "0") == 0) return nullptr;
  const libbpf_print_fn_t before = libbpf_set_print(quiet);
  ptrace_stops_bpf* skel = ptrace_stops_bpf__open();
  bool ok = skel != nullptr;
  if (ok) {
    // The system-call programs run on every thread of the machine: only under --why, and
    // only once the trace asks (watch_syscalls).
    bpf_program__set_autoattach(skel->progs.gotap_stop_sys_enter, false);
    bpf_program__set_autoattach(skel->progs.gotap_stop_sys_exit, false);
    bpf_program__set_autoattach(skel->progs.gotap_stop_thread_exit, false);
    if (syscalls) bpf_map__set_max_entries(skel->maps.stop_syscalls, why::why_threads_max());
    ok = ptrace_stops_bpf__load(skel) == 0 && ptrace_stops_bpf__attach(skel) == 0;
  }
  libbpf_set_print(before);
  if (!ok) {
    ptrace_stops_bpf__destroy(skel);
    return nullptr;
  }
  std::unique_ptr<StopTimes> t(new StopTimes);
  t->impl_ = new Impl{skel, bpf_map__fd(skel->maps.stop_times), syscalls};
  return t;
}

void StopTimes::watch(pid_t pid) {
  // The program reads it from its global data, which libbpf maps into gotap.
  impl_->skel->bss->target_tgid = static_cast<uint32_t>(pid);
  __sync_synchronize();
  since_ = sys::monotonic_ns();
}

StopTimes::~StopTimes() {
  if (impl_) ptrace_stops_bpf__destroy(impl_->skel);
  delete impl_;
}

bool StopTimes::watch_syscalls() {
  ptrace_stops_bpf* skel = impl_->skel;
  if (!impl_->syscalls) return false;
  if (!skel->links.gotap_stop_sys_enter)
    skel->links.gotap_stop_sys_enter = bpf_program__attach(skel->progs.gotap_stop_sys_enter);
  if (!skel->links.gotap_stop_sys_exit)
    skel->links.gotap_stop_sys_exit = bpf_program__attach(skel->progs.gotap_stop_sys_exit);
  if (!skel->links.gotap_stop_thread_exit)
    skel->links.gotap_stop_thread_exit = bpf_program__attach(skel->progs.gotap_stop_thread_exit);
  if (!skel->links.gotap_stop_sys_enter || !skel->links.gotap_stop_sys_exit ||
      !skel->links.gotap_stop_thread_exit)
    return false;
  skel->bss->why_syscalls = 1;
  __sync_synchronize();
  return true;
}

std::vector<StopTimes::Syscall> StopTimes::take_syscalls(pid_t tid) {
  std::vector<Syscall> out;
  ptrace_stops_bpf* skel = impl_->skel;
  if (!skel->bss->why_syscalls) return out;
  const int fd = bpf_map__fd(skel->maps.stop_syscalls);
  const uint32_t key = static_cast<uint32_t>(tid);
  struct ptrace_syscalls v {};
  if (bpf_map_lookup_elem(fd, &key, &v) != 0 || (v.n == 0 && v.other.count == 0)) return out;
  for (uint32_t i = 0; i < v.n && i < PTRACE_SYSCALL_SLOTS; ++i)
    out.push_back({v.slot[i].from, v.slot[i].to, v.slot[i].ns, v.slot[i].nr, v.slot[i].count});
  if (v.other.count) out.push_back({v.other.from, v.other.to, v.other.ns, 0, v.other.count, true});
  // What the thread is in now (sys_at) stays: it is read at its exit.
  v.n = 0;
  v.other = {};
  bpf_map_update_elem(fd, &key, &v, BPF_EXIST);
  return out;
}

uint64_t StopTimes::syscalls_lost() const {
  return __atomic_load_n(&impl_->skel->bss->syscalls_lost, __ATOMIC_RELAXED);
}

std::optional<StopTimes::Times> StopTimes::of(pid_t tid) const {
  const uint32_t key = static_cast<uint32_t>(tid);
  struct ptrace_stop_times v {};
  if (bpf_map_lookup_elem(impl_->map_fd, &key, &v) != 0) return std::nullopt;
  return Times{v.out, v.in, v.prev_in, v.trap, v.preempted};
}

#else

struct StopTimes::Impl {};
std::unique_ptr<StopTimes> StopTimes::open(bool) {
  return nullptr;
}
bool StopTimes::watch_syscalls() {
  return false;
}
std::vector<StopTimes::Syscall> StopTimes::take_syscalls(pid_t) {
  return {};
}
uint64_t StopTimes::syscalls_lost() const {
  return 0;
}
void StopTimes::watch(pid_t) {}
StopTimes::~StopTimes() {
  delete impl_;
}
std::optional<StopTimes::Times> StopTimes::of(pid_t) const {
  return std::nullopt;
}

#endif

}  // namespace gotap::ptrace
