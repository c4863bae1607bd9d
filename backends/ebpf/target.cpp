#include "backends/ebpf/target.h"

#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/backend.h"
#include "core/sys/spawn.h"

namespace gotap::ebpf {

namespace {

int pidfd_open(int pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

TargetProcess::TargetProcess(TargetProcess&& o) noexcept {
  *this = std::move(o);
}

TargetProcess& TargetProcess::operator=(TargetProcess&& o) noexcept {
  if (this != &o) {
    pid_ = std::exchange(o.pid_, 0);
    pidfd_ = std::move(o.pidfd_);
    launched_ = std::exchange(o.launched_, false);
    stopped_ = std::exchange(o.stopped_, false);
    exited_ = o.exited_;
    exit_status_ = o.exit_status_;
    pending_signal_ = o.pending_signal_;
  }
  return *this;
}

TargetProcess::~TargetProcess() {
  // A child that never got its probes still must not stay stopped forever.
  if (launched_ && stopped_ && !exited_) {
    kill(pid_, SIGKILL);
    ptrace(PTRACE_DETACH, pid_, nullptr, nullptr);
    waitpid(pid_, nullptr, 0);
  }
}

Result<TargetProcess> TargetProcess::launch(const std::vector<std::string>& argv) {
  auto child = sys::fork_exec(argv, sys::TraceStop::AtExec);
  if (!child) return child.error();
  const pid_t pid = child->pid;
  TargetProcess t;
  t.pid_ = pid;
  t.launched_ = true;
  if (int err = child->exec_error()) {
    waitpid(pid, nullptr, 0);
    t.exited_ = true;
    Error e = make_error("cannot run {}", argv[0]);
    e.errnum = err;
    return e;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return errno_error(ErrorKind::Runtime, "waitpid {}", pid);
  }
  if (!WIFSTOPPED(status)) {
    t.exited_ = true;
    return runtime_error("{} exited before it could be traced", argv[0]);
  }
  t.stopped_ = true;
  t.pidfd_.reset(pidfd_open(pid));
  return t;
}

Result<TargetProcess> TargetProcess::attach(int pid) {
  TargetProcess t;
  t.pid_ = pid;
  t.pidfd_.reset(pidfd_open(pid));
  if (!t.pidfd_) return errno_error(ErrorKind::BadInput, "no process with pid {}", pid);
  return t;
}

Result<bool> TargetProcess::run_syscalls_until(const std::function<bool()>& done, int max_stops) {
  if (!launched_ || !stopped_) return done();
  // Syscall stops then read SIGTRAP|0x80, told apart from a real SIGTRAP.
  if (ptrace(PTRACE_SETOPTIONS, pid_, nullptr, PTRACE_O_TRACESYSGOOD) != 0)
    return errno_error(ErrorKind::Runtime, "ptrace options of pid {}", pid_);
  for (int i = 0; i < max_stops; ++i) {
    if (done()) return true;
    // Ctrl-C meanwhile: the child, still stopped, is ended with the run.
    if (stop_requested()) return runtime_error("stopped before pid {} was traced", pid_);
    if (ptrace(PTRACE_SYSCALL, pid_, nullptr, reinterpret_cast<void*>(intptr_t(pending_signal_))))
      return errno_error(ErrorKind::Runtime, "resume pid {}", pid_);
    pending_signal_ = 0;
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0)
      if (errno != EINTR || stop_requested())
        return errno_error(ErrorKind::Runtime, "waitpid {}", pid_);
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      exited_ = true;
      stopped_ = false;
      exit_status_ = status;
      return runtime_error("pid {} exited before its first instruction", pid_);
    }
    // A signal that stopped it is its own: passed on with the next resume.
    if (WIFSTOPPED(status) && WSTOPSIG(status) != (SIGTRAP | 0x80))
      pending_signal_ = WSTOPSIG(status);
  }
  return done();
}

Result<void> TargetProcess::release() {
  if (!launched_ || !stopped_) return {};
  if (ptrace(PTRACE_DETACH, pid_, nullptr, reinterpret_cast<void*>(intptr_t(pending_signal_))) != 0)
    return errno_error(ErrorKind::Runtime, "resume pid {}", pid_);
  stopped_ = false;
  return {};
}

bool TargetProcess::exited() {
  if (exited_ || pid_ <= 0) return exited_;
  if (launched_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) {
      exited_ = true;
      exit_status_ = status;
    } else if (r < 0 && errno == ECHILD) {
      exited_ = true;
    }
    return exited_;
  }
  if (pidfd_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    if (poll(&p, 1, 0) > 0) exited_ = true;
    return exited_;
  }
  exited_ = kill(pid_, 0) != 0 && errno == ESRCH;
  return exited_;
}

void TargetProcess::terminate() {
  if (!launched_ || exited()) return;
  if (stopped_) {
    // Never ran: nothing to give a grace period to.
    kill(pid_, SIGKILL);
    release().ok();
  }
  if (auto e = sys::end_child(pid_)) exit_status_ = e->status;
  exited_ = true;
}

}  // namespace gotap::ebpf
