// Run's unpatch: the jumps taken back with every thread stopped, the pages released where no
// thread can be in them or return into them (run.h).
#include "backends/trampoline/run.h"

#include <sys/uio.h>
#include <unistd.h>

#include <csignal>

#include <fmt/format.h>

#include "backends/ptrace/page_release.h"
#include "backends/trampoline/owner.h"

namespace gotap::trampoline {

using ptrace::Process;

void Run::remove() {
  auto lock = lock_image(sys::ImageLock::kRemoveWaitMs, false);
  if (!lock)
    fmt::print(stderr, "gotap: warning: removing the trampolines unlocked: {}\n",
               lock.error().what());
  proc_.reset();
  auto p = Process::attach(pid_, nullptr);
  if (!p) {
    // Gone meanwhile, or going (a zombie leader: ptrace takes no exiting process): nothing
    // is left to remove.
    if (::kill(pid_, 0) != 0 || exiting()) {
      ended_by_ = "exit";
      return;
    }
    remove_error_ = fmt::format("cannot attach to take them out: {}", p.error().what());
    return;
  }
  proc_ = std::move(*p);
  proc_->set_inject_phase("detach");
  if (proc_->threads().empty()) return;
  const pid_t held = proc_->threads().count(pid_) ? pid_ : *proc_->threads().begin();
  if (auto r = proc_->interrupt_and_wait(held); !r) {
    proc_->detach_all(ptrace::trap_unchanged);
    remove_error_ = fmt::format("cannot stop thread {}: {}", held, r.error().what());
    return;
  }
  if (proc_->exec_seen() || !still_patched()) {
    proc_->detach_all(ptrace::trap_unchanged, held);
    ended_by_ = "exec";
    return;
  }
  bool all_held = false;
  WriteTally t;
  proc_->detach_all(ptrace::trap_unchanged, held, [&](const std::vector<pid_t>& stopped) {
    all_held = true;
    for (auto& m : mapped_) {
      const WriteTally w = restore_jumps(proc_->mem(), m->sites);
      t.written += w.written;
      t.foreign += w.foreign;
      t.failed += w.failed;
      t.taken += w.taken;
      m->jumps_left = w.failed != 0;
    }
    pages_kept_ = !release_pages(held, stopped);
  });
  // A thread in the pages, or one that may return into them: with no jump left to them it
  // leaves soon, and they are looked at again, a few times (a whole server's trampolines
  // mirror its text, where a stale word on a stack may point).
  for (int i = 0; pages_kept_ && all_held && !t.failed && i < 5; ++i) {
    usleep(20'000);
    pages_kept_ = !release_pages_again();
  }
  restored_ = t.written;
  left_ = t.failed;
  taken_ = t.taken;
  if (t.taken)
    fmt::print(stderr,
               "gotap: warning: another tracer put a uprobe on the jump of {} function{} during "
               "the trace: the kernel ran the original code there while it was there, and those "
               "calls were not counted (taken_by_uprobes in the summary)\n",
               t.taken, t.taken == 1 ? "" : "s");
  if (!all_held)
    remove_error_ =
        fmt::format("cannot stop every thread of pid {} (stopped by job control?)", pid_);
  else if (t.failed)
    remove_error_ = fmt::format("{} of {} jumps could not be written back", t.failed, placed_);
  if (t.foreign)
    fmt::print(stderr,
               "gotap: warning: {} sites changed during the trace (another tracer): left as "
               "they are\n",
               t.foreign);
}

bool Run::release_pages(pid_t held, const std::vector<pid_t>& stopped) {
  bool all = true;
  for (auto& m : mapped_) {
    if (!m->pages.code()) continue;
    bool keep = m->jumps_left;
    const uint64_t lo = m->pages.code(), hi = lo + m->pages.code_size();
    // Still ours (not another image's, after an exec): its header names this gotap.
    const auto owner = region_owner(proc_->mem(), lo);
    const Owner me = self_owner();
    if (!owner || owner->pid != me.pid || owner->start != me.start) continue;
    for (pid_t s : stopped) keep = keep || ptrace::may_return_into(s, proc_->mem(), lo, hi);
    if (keep || !m->pages.unmap(*proc_, held, syscall_at_)) all = false;
  }
  return all;
}

bool Run::release_pages_again() {
  proc_.reset();
  auto p = Process::attach(pid_, nullptr);
  if (!p) return ::kill(pid_, 0) != 0;  // gone: so are its pages
  proc_ = std::move(*p);
  if (proc_->threads().empty()) return false;
  const pid_t held = proc_->threads().count(pid_) ? pid_ : *proc_->threads().begin();
  if (!proc_->interrupt_and_wait(held)) {
    proc_->detach_all(ptrace::trap_unchanged);
    return false;
  }
  if (proc_->exec_seen()) {  // the pages went with the old image
    proc_->detach_all(ptrace::trap_unchanged, held);
    return true;
  }
  bool released = false;
  proc_->detach_all(ptrace::trap_unchanged, held, [&](const std::vector<pid_t>& stopped) {
    released = release_pages(held, stopped);
  });
  return released;
}

bool Run::still_patched() const {
  uint8_t b = 0;
  iovec local{&b, 1}, remote{reinterpret_cast<void*>(mapped_[0]->pages.code()), 1};
  return process_vm_readv(pid_, &local, 1, &remote, 1, 0) == 1;
}

}  // namespace gotap::trampoline
