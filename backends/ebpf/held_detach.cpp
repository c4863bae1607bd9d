#include "backends/ebpf/held_detach.h"

#include "backends/ptrace/process.h"
#include "core/sys/test_delay.h"
#include "core/sys/timing.h"

namespace gotap::ebpf {

HeldDetach detach_holding_threads(pid_t pid, const std::function<void()>& detach) {
  HeldDetach r;
  auto p = ptrace::Process::attach(pid, nullptr);
  if (!p) {
    r.why_not = p.error().what();
    detach();
    return r;
  }
  ptrace::Process& proc = **p;
  if (proc.threads().empty()) {
    r.why_not = "no thread to hold";
    detach();
    return r;
  }
  const pid_t first = proc.threads().count(pid) ? pid : *proc.threads().begin();
  if (auto stopped = proc.interrupt_and_wait(first, ptrace::trap_unchanged); !stopped) {
    proc.detach_all(ptrace::trap_unchanged);
    r.why_not = stopped.error().what();
    detach();
    return r;
  }
  // After an exec the uprobes went with the old image: nothing is worth a pause. The
  // uprobes' removal is all of the pause: the grace periods that end closing a link were
  // measured at 20 to 40 ms of 0.4 s, not worth a thread to let the program go before them.
  if (!proc.exec_seen()) {
    proc.detach_all(ptrace::trap_unchanged, first, [&](const std::vector<pid_t>&) {
      sys::timing_mark("ebpf: threads held");
      sys::test_delay("GOTAP_TEST_HELD_DETACH_DELAY_MS", "removing the probes, threads held");
      detach();
      r.held = true;
    });
  } else {
    proc.detach_all(ptrace::trap_unchanged, first);
  }
  if (r.held) {
    sys::timing_mark("ebpf: threads let go");
    return r;
  }
  r.why_not = proc.exec_seen() ? "the program exec'd" : "a thread could not be held";
  detach();
  return r;
}

}  // namespace gotap::ebpf
