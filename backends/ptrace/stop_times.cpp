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

namespace gotap::ptrace {

#ifdef GOTAP_PTRACE_STOP_BPF

struct StopTimes::Impl {
  ptrace_stops_bpf* skel = nullptr;
  int map_fd = -1;
};

namespace {

// A kernel or a user that cannot load it is not an error: the schedstat clock serves. Its
// messages would only say so, on a trace's stderr.
int quiet(enum libbpf_print_level, const char*, va_list) {
  return 0;
}

}  // namespace

std::unique_ptr<StopTimes> StopTimes::open() {
  if (const char* e = getenv("GOTAP_PTRACE_STOP_BPF"); e && strcmp(e, "0") == 0) return nullptr;
  const libbpf_print_fn_t before = libbpf_set_print(quiet);
  ptrace_stops_bpf* skel = ptrace_stops_bpf__open_and_load();
  const bool ok = skel != nullptr && ptrace_stops_bpf__attach(skel) == 0;
  libbpf_set_print(before);
  if (!ok) {
    ptrace_stops_bpf__destroy(skel);
    return nullptr;
  }
  std::unique_ptr<StopTimes> t(new StopTimes);
  t->impl_ = new Impl{skel, bpf_map__fd(skel->maps.stop_times)};
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

std::optional<StopTimes::Times> StopTimes::of(pid_t tid) const {
  const uint32_t key = static_cast<uint32_t>(tid);
  struct ptrace_stop_times v {};
  if (bpf_map_lookup_elem(impl_->map_fd, &key, &v) != 0) return std::nullopt;
  return Times{v.out, v.in, v.prev_in, v.trap, v.preempted};
}

#else

struct StopTimes::Impl {};
std::unique_ptr<StopTimes> StopTimes::open() {
  return nullptr;
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
