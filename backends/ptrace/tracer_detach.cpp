// The ptrace tracer's end: the original bytes back, the safety net and the scratch pages
// released, every thread let go, and a launched program ended with the trace.
#include "backends/ptrace/tracer.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <type_traits>

#include <fmt/format.h>

#include "backends/ptrace/page_release.h"
#include "backends/ptrace/unwind.h"
#include "core/binary/elf_file.h"
#include "core/cond/condition.h"
#include "core/cond/eval.h"
#include "core/events/latency.h"
#include "core/events/live_metrics.h"
#include "core/events/typed_events.h"
#include "core/model/wait_reasons.h"
#include "core/plan/error_result.h"
#include "core/plan/fork_child.h"
#include "core/plan/image_identity.h"
#include "core/plan/signals_blocked.h"
#include "core/sys/spawn.h"
#include "core/sys/test_delay.h"
#include "core/sys/timing.h"
#include "core/sys/uprobe_holders.h"

namespace gotap::ptrace {

using nlohmann::json;

FileText Tracer::file_text() const {
  // The writes go in address order: what they passed is given back a MiB at a time, so that
  // a whole binary's text (17 MB) is never resident at once.
  auto from = std::make_shared<uint64_t>(UINT64_MAX);
  return [this, from](uint64_t addr, size_t n) -> std::span<const uint8_t> {
    if (addr < bias_) return {};
    const uint64_t v = addr - bias_;
    constexpr uint64_t kStep = 1 << 20;
    if (*from == UINT64_MAX || v < *from) *from = v & ~(kStep - 1);
    if (v - *from >= 2 * kStep) {
      const uint64_t to = (v & ~(kStep - 1)) - kStep;
      bin_.elf->release(*from, to - *from);
      *from = to;
    }
    return bin_.elf->read(v, n);
  };
}

void Tracer::release_file_text() const {
  for (const auto& seg : bin_.elf->segments())
    if (seg.type == 1 /* PT_LOAD */ && (seg.flags & 1 /* PF_X */))
      bin_.elf->release(seg.vaddr, seg.filesz);
}

void Tracer::detach() {
  if (proc_->gone()) return;
  if (exec_ended_) {
    proc_->detach_all(trap_unchanged);
    return;
  }
  {
    // No other gotap looks at a site while the bytes go back; one that waited longer than this
    // is stuck, and the int3s go all the same.
    auto lock = lock_image(proc_->pid(), sys::ImageLock::kRemoveWaitMs, false);
    if (!lock)
      fmt::print(stderr, "gotap: warning: removing the probes unlocked: {}\n", lock.error().what());
    // A uprobe placed on a site since gotap's int3 took that site's hits; its int3 stays.
    if (auto [n, who] = share_uprobe_sites(); n)
      fmt::print(stderr,
                 "gotap: warning: another tracer put a uprobe on {} of the probe sites during the "
                 "trace ({}): it took their hits from then on; its int3s are left to it\n",
                 n, who);
    bps_.restore_all(proc_->mem(), file_text());
  }
  release_file_text();
  // A hit taken before the restore: run the original instruction, now back in place.
  auto rewind = [this](pid_t, user_regs_struct& r) {
    if (!bps_.find(r.rip - 1)) return rewind_leftover(leftover_sites_, proc_->mem(), r);
    r.rip -= 1;
    return true;
  };
  // The program's own SIGTRAP handler goes back, through one stopped thread that the detach
  // then releases with the rest.
  pid_t held = 0;
  // A process stopped by job control (SIGSTOP, Ctrl-Z) cannot run the injected syscall: it
  // keeps the net, which chains to Go's handler and changes nothing else.
  if (net_.armed() && !proc_->threads().empty()) {
    pid_t t = proc_->threads().count(proc_->pid()) ? proc_->pid() : *proc_->threads().begin();
    if (proc_->interrupt_and_wait(t, rewind)) {
      held = t;
      proc_->set_inject_phase("detach", rewind);
      if (auto r = net_.disarm(*proc_, t, syscall_at_); !r)
        fmt::print(stderr, "gotap: warning: the program's SIGTRAP handler was not restored: {}\n",
                   r.error().what());
    }
  }
  // A normal end leaves nothing a later gotap could take for a dead one's probes. While the
  // net is still the handler (a job-control stop), its table must stay.
  if (!net_.armed()) retire_table(proc_->mem(), bps_.scratch());
  // Without a held thread nothing can be injected: detach_all then holds no thread.
  proc_->detach_all(rewind, held,
                    [&](const std::vector<pid_t>& stopped) { release_pages(stopped, held); });
}

void Tracer::end_launched(bool gone) {
  if (!proc_->launched() || gone) return;
  // A program that replaced itself runs untraced, but it is still the trace's: as the eBPF
  // backend does, gotap waits for it until the trace ends.
  if (exec_ended_) {
    for (;;) {
      siginfo_t si{};
      if (stop_due() || waitid(P_PID, id_t(proc_->pid()), &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
          si.si_pid != 0)
        break;
      usleep(20'000);
    }
  }
  (void)sys::end_child(proc_->pid());
}

void Tracer::release_pages(const std::vector<pid_t>& stopped, pid_t via) {
  net_.release_data(*proc_, via, syscall_at_);
  const uint64_t lo = bps_.scratch(), hi = lo + bps_.scratch_size();
  if (!lo || net_.handler_out()) return;
  // The Go stack each thread is on bounds the search for a signal frame (page_release.h).
  GoroutineReader g(proc_->mem(), plan_);
  for (pid_t t : stopped) {
    user_regs_struct r{};
    std::optional<GInfo> gi;
    if (::ptrace(PTRACE_GETREGS, t, nullptr, &r) == 0) {
      gi = g.current(r, true);
      // A thread stopped in a copy (resumed into it, and interrupted or signalled before it
      // ran) goes on from the text instead, where the original bytes are back: the same.
      // Kept there, it kept the page 1 attach in 200 to a program whose threads come and go.
      if (auto pc = bps_.text_pc_for(r.rip, proc_->mem())) {
        r.rip = *pc;
        if (::ptrace(PTRACE_SETREGS, t, nullptr, &r) != 0) return;
      }
    }
    if (may_return_into(t, proc_->mem(), lo, hi, gi ? gi->stack_hi : 0)) return;
  }
  auto r = proc_->inject_syscall(via, syscall_at_, SYS_munmap, {lo, hi - lo});
  if (r && *r == 0) bps_.forget_scratch();
}

}  // namespace gotap::ptrace
