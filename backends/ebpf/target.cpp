#include "backends/ebpf/target.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

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
    if (pidfd_ >= 0) close(pidfd_);
    pid_ = o.pid_;
    pidfd_ = o.pidfd_;
    launched_ = o.launched_;
    stopped_ = o.stopped_;
    exited_ = o.exited_;
    exit_status_ = o.exit_status_;
    o.pidfd_ = -1;
    o.pid_ = 0;
    o.launched_ = o.stopped_ = false;
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
  if (pidfd_ >= 0) close(pidfd_);
}

Result<TargetProcess> TargetProcess::launch(const std::vector<std::string>& argv) {
  if (argv.empty()) return make_error("no command to launch");
  // The child reports a failed exec through a close-on-exec pipe.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return errno_error(ErrorKind::Runtime, "pipe");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return errno_error(ErrorKind::Runtime, "fork");
  }
  if (pid == 0) {
    close(fds[0]);
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    execvp(args[0], args.data());
    int err = errno;
    ssize_t n = write(fds[1], &err, sizeof(err));
    (void)n;
    _exit(127);
  }
  close(fds[1]);
  int err = 0;
  ssize_t n;
  do {
    n = read(fds[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  TargetProcess t;
  t.pid_ = pid;
  t.launched_ = true;
  if (n == sizeof(err)) {
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
  t.pidfd_ = pidfd_open(pid);
  return t;
}

Result<TargetProcess> TargetProcess::attach(int pid) {
  TargetProcess t;
  t.pid_ = pid;
  t.pidfd_ = pidfd_open(pid);
  if (t.pidfd_ < 0) return errno_error(ErrorKind::BadInput, "no process with pid {}", pid);
  return t;
}

Result<void> TargetProcess::release() {
  if (!launched_ || !stopped_) return {};
  if (ptrace(PTRACE_DETACH, pid_, nullptr, nullptr) != 0)
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
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) exited_ = true;
    return exited_;
  }
  exited_ = kill(pid_, 0) != 0 && errno == ESRCH;
  return exited_;
}

void TargetProcess::terminate() {
  if (!launched_ || exited()) return;
  if (stopped_) {
    kill(pid_, SIGKILL);
    release().ok();
  } else {
    kill(pid_, SIGTERM);
  }
  for (int i = 0; i < 100 && !exited(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!exited()) {
    kill(pid_, SIGKILL);
    int status = 0;
    if (waitpid(pid_, &status, 0) == pid_) exit_status_ = status;
    exited_ = true;
  }
}

uint64_t load_bias(int pid, uint64_t first_load_vaddr) {
  char exe[4096];
  std::string link = "/proc/" + std::to_string(pid) + "/exe";
  ssize_t n = readlink(link.c_str(), exe, sizeof(exe) - 1);
  if (n <= 0) return 0;
  exe[n] = 0;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream ls(line);
    std::string range, perms, off, dev, inode, path;
    ls >> range >> perms >> off >> dev >> inode >> path;
    if (path != exe) continue;
    if (std::stoull(off, nullptr, 16) != 0) continue;
    uint64_t start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    uint64_t linked = first_load_vaddr & ~uint64_t{0xfff};
    return start > linked ? start - linked : 0;
  }
  return 0;
}

}  // namespace gotap::ebpf
