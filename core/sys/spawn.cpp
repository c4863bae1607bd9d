#include "core/sys/spawn.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

extern char** environ;

namespace gotap::sys {

namespace {

std::vector<std::string> g_env;
std::vector<char*> g_envp;  // into g_env, null-terminated; empty until kept

}  // namespace

void keep_launch_environment() {
  g_env.clear();
  for (char** e = environ; e && *e; ++e) g_env.emplace_back(*e);
  g_envp.clear();
  for (auto& v : g_env) g_envp.push_back(v.data());
  g_envp.push_back(nullptr);
}

std::string find_on_path(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  const char* env = getenv("PATH");
  std::string p = env ? env : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string cand = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    // execvp passes over directories and files it may not run.
    if (stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(cand.c_str(), X_OK) == 0)
      return cand;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

int ExecChild::exec_error() {
  int err = 0;
  ssize_t n;
  do {
    n = read(exec_errors.get(), &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  exec_errors.reset();
  return n == static_cast<ssize_t>(sizeof(err)) ? err : 0;
}

Result<ExecChild> fork_exec(const std::vector<std::string>& argv, TraceStop how) {
  if (argv.empty()) return make_error("no command to launch");
  const std::string path = find_on_path(argv[0]);
  if (path.empty()) {
    Error e = make_error("cannot run {}", argv[0]);
    e.errnum = ENOENT;
    return e;
  }
  // Everything the child needs is built before the fork: after it, only async-signal-safe
  // calls (the parent may have other threads, holding the allocator's locks).
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Pipe errors = make_pipe();
  if (!errors.read) return errno_error(ErrorKind::Runtime, "pipe");
  pid_t pid = fork();
  if (pid < 0) return errno_error(ErrorKind::Runtime, "fork");
  if (pid == 0) {
    if (how == TraceStop::AtExec)
      ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    else
      raise(SIGSTOP);
    if (g_envp.empty())
      execv(path.c_str(), args.data());
    else
      execve(path.c_str(), args.data(), g_envp.data());
    int err = errno;
    ssize_t n = write(errors.write.get(), &err, sizeof(err));
    (void)n;
    _exit(127);
  }
  return ExecChild{pid, std::move(errors.read)};
}

namespace {

// 1: reaped (*status set), 0: still running, -1: no child of ours by that pid.
int try_reap(pid_t pid, int* status, bool block) {
  for (;;) {
    const pid_t r = waitpid(pid, status, block ? 0 : WNOHANG);
    if (r == pid) return 1;
    if (r == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

}  // namespace

std::optional<EndedChild> end_child(pid_t pid, int grace_ms) {
  EndedChild out;
  int got = try_reap(pid, &out.status, false);
  if (got != 0) return got > 0 ? std::optional(out) : std::nullopt;
  out.signalled = true;
  kill(pid, SIGTERM);
  kill(pid, SIGCONT);
  for (int waited = 0; waited < grace_ms; waited += 10) {
    usleep(10'000);
    got = try_reap(pid, &out.status, false);
    if (got != 0) return got > 0 ? std::optional(out) : std::nullopt;
  }
  kill(pid, SIGKILL);
  if (try_reap(pid, &out.status, true) < 0) return std::nullopt;
  return out;
}

}  // namespace gotap::sys
