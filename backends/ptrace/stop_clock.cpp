#include "backends/ptrace/stop_clock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <initializer_list>

#include "core/sys/timing.h"

namespace gotap::ptrace {

StopClock::~StopClock() {
  for (auto& [tid, t] : threads_) close_files(t);
}

bool parse_schedstat(const char* line, size_t n, uint64_t& cpu, uint64_t& wait, uint64_t& slices) {
  uint64_t v[3] = {0, 0, 0};
  size_t i = 0;
  for (int k = 0; k < 3; ++k) {
    while (i < n && line[i] == ' ') ++i;
    if (i >= n || line[i] < '0' || line[i] > '9') return false;
    uint64_t x = 0;
    for (; i < n && line[i] >= '0' && line[i] <= '9'; ++i) {
      if (x > (UINT64_MAX - 9) / 10) return false;
      x = x * 10 + uint64_t(line[i] - '0');
    }
    v[k] = x;
  }
  cpu = v[0];
  wait = v[1];
  slices = v[2];
  return true;
}

StopClock::StopClock(pid_t pid, bool why)
    : pid_(pid), times_(StopTimes::open(why)), trap_cost_(measure_trap_cost()) {
  if (times_) times_->watch(pid);
}

std::optional<StopTimes::Times> StopClock::switch_times(pid_t tid, uint64_t lo) const {
  // The stop is reported to gotap just before the thread's own switch away from its CPU
  // (ptrace_stop notifies, then schedules): a lookup that still finds an earlier stop is
  // tried again for a few microseconds. That one is told by its run since (`in`), which this
  // stop cannot have had; a thread's stop also comes after its resume, or after the program
  // was attached.
  for (int i = 0; i < 64; ++i)
    if (auto v = times_->of(tid); v && v->in == 0 && v->out >= lo) return v;
  return std::nullopt;
}

uint64_t StopClock::measure_trap_cost() {
  // A child of gotap's own, stopped at an int3 again and again: the program is not touched.
  const pid_t c = ::fork();
  if (c < 0) return 0;
  if (c == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    ::raise(SIGSTOP);
    for (;;) __asm__ volatile("int3");
  }
  uint64_t best = UINT64_MAX, best_ret = UINT64_MAX;
  int st = 0;
  if (::waitpid(c, &st, 0) == c && WIFSTOPPED(st)) {
    if (times_) times_->watch(c);
    Thread t;
    Account prev, now;
    bool have = read(t, c, prev, c);
    for (int i = 0; i < kCalibrations && (have || times_); ++i) {
      const uint64_t resumed = sys::monotonic_ns();
      if (::ptrace(PTRACE_CONT, c, nullptr, nullptr) != 0 || ::waitpid(c, &st, 0) != c ||
          !WIFSTOPPED(st) || WSTOPSIG(st) != SIGTRAP)
        break;
      if (have && read(t, c, now, c)) {
        if (now.slices == prev.slices + 1 && now.cpu > prev.cpu)
          best = std::min(best, now.cpu - prev.cpu);
        prev = now;
      }
      // The kernel's way back to the program after a resume: from the child's first run to
      // its next int3, which is all it runs.
      if (times_)
        if (auto v = switch_times(c, resumed);
            v && v->prev_in >= resumed && v->trap > v->prev_in && v->trap <= v->out)
          best_ret = std::min(best_ret, v->trap - v->prev_in);
    }
    close_files(t);
  }
  ::kill(c, SIGKILL);
  while (::waitpid(c, &st, 0) < 0 && errno == EINTR) {
  }
  ret_cost_ = best_ret == UINT64_MAX ? 0 : best_ret;
  return best == UINT64_MAX ? 0 : best;
}

void StopClock::close_files(Thread& t) {
  for (int* fd : {&t.fd, &t.status_fd})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
      --open_files_;
    }
}

std::optional<uint64_t> parse_voluntary_switches(std::string_view status) {
  constexpr std::string_view kKey = "\nvoluntary_ctxt_switches:";
  const size_t at = status.find(kKey);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + kKey.size();
  while (i < status.size() && (status[i] == ' ' || status[i] == '\t')) ++i;
  if (i >= status.size() || status[i] < '0' || status[i] > '9') return std::nullopt;
  uint64_t x = 0;
  for (; i < status.size() && status[i] >= '0' && status[i] <= '9'; ++i) {
    if (x > (UINT64_MAX - 9) / 10) return std::nullopt;
    x = x * 10 + uint64_t(status[i] - '0');
  }
  // A number cut by the end of what was read is no number.
  if (i >= status.size()) return std::nullopt;
  return x;
}

ssize_t StopClock::read_proc(int& fd, pid_t pid, pid_t tid, const char* name, char* buf, size_t n) {
  if (fd < 0) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task/%d/%s", pid, tid, name);
    const int f = ::open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return -1;
    if (open_files_ >= kOpenFiles) {
      const ssize_t r = ::pread(f, buf, n, 0);
      ::close(f);
      return r;
    }
    fd = f;
    ++open_files_;
  }
  return ::pread(fd, buf, n, 0);
}

bool StopClock::read(Thread& t, pid_t tid, Account& out, pid_t pid) {
  char buf[96];
  const ssize_t n = read_proc(t.fd, pid, tid, "schedstat", buf, sizeof buf);
  return n > 0 && parse_schedstat(buf, size_t(n), out.cpu, out.wait, out.slices);
}

std::optional<uint64_t> StopClock::voluntary(Thread& t, pid_t tid) {
  char buf[4096];
  const ssize_t n = read_proc(t.status_fd, pid_, tid, "status", buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  return parse_voluntary_switches(std::string_view(buf, size_t(n)));
}

void StopClock::probe_resumed(pid_t except) {
  size_t keep = 0;
  for (pid_t tid : unprobed_) {
    auto it = threads_.find(tid);
    if (it == threads_.end() || tid == except || !it->second.resumed) continue;
    Thread& t = it->second;
    Account now;
    if (!read(t, tid, now, pid_) || now.slices < t.acct.slices || now.wait < t.acct.wait) continue;
    if (now.slices == t.acct.slices) {
      unprobed_[keep++] = tid;  // still waiting for its CPU
      continue;
    }
    if (now.slices == t.acct.slices + 1) t.first_wait = now.wait - t.acct.wait;
  }
  unprobed_.resize(keep);
}

void StopClock::date_by_switch(Thread& t, pid_t tid, Stop& s) {
  const uint64_t lo = t.resumed ? t.resumed_at : times_->since();
  // Not checked against when gotap took it: the switch comes just after the report that
  // gotap stamps, and a stop taken while attaching is stamped long before it is dated here.
  const auto v = switch_times(tid, lo);
  if (!v) {
    // The stop's own switch is not seen yet (a busy machine delays it): its first run since
    // the resume before it is (`in`), so the time that resume waited for a CPU is known all
    // the same; and so is its time preempted, complete once it is stopped (it grew at its
    // last switch in).
    const auto w = times_->of(tid);
    if (!w) return;
    s.preempted_total = w->preempted;
    if (t.resumed && w->in >= t.resumed_at && w->in <= s.at) {
      s.resumed_late = w->in - t.resumed_at;
      s.resumed_at = t.resumed_at;
      s.resumed_goid = t.goid;
    }
    return;
  }
  s.preempted_total = v->preempted;
  // A probe hit is dated by its int3's SIGTRAP, before the kernel's way to the stop, less
  // the kernel's way back to the program after the resume before it (ret_cost, measured on
  // the calibration child: its least), so that a call keeps the program's time alone.
  // Another stop (a signal's) by its switch, less the kernel's part of a stop and resume.
  if (v->trap >= lo && v->trap <= v->out)
    s.at = std::max(lo, v->trap - std::min(v->trap, ret_cost_));
  else
    s.at = std::max(lo, v->out - std::min(v->out, trap_cost_));
  s.exact = true;
  ++exact_;
  if (t.resumed && v->prev_in >= t.resumed_at && v->prev_in <= v->out) {
    s.resumed_late = v->prev_in - t.resumed_at;
    s.resumed_at = t.resumed_at;
    s.resumed_goid = t.goid;
  }
}

StopClock::Stop StopClock::on_stop(pid_t tid, uint64_t taken) {
  ++stops_;
  Stop s;
  s.at = taken;
  Thread& t = threads_[tid];
  if (times_) {
    date_by_switch(t, tid, s);
    t.resumed = false;
    t.goid.reset();
    return s;
  }
  probe_resumed(tid);
  Account now;
  // A kernel without the account (no CONFIG_SCHED_INFO) prints zeros: nothing to go by.
  const bool ok = read(t, tid, now, pid_) && now.slices > 0;
  const bool ordered = ok && t.have_acct && now.slices > t.acct.slices && now.cpu >= t.acct.cpu &&
                       now.wait >= t.acct.wait;
  const uint64_t slices = ordered ? now.slices - t.acct.slices : 0;
  // Voluntary switches: one at each stop, one at each sleep. Read (~6 µs) only when the
  // thread got a CPU more than once; after a single run, its stop was the one switch.
  std::optional<uint64_t> vol;
  if (slices == 1 && t.vol)
    vol = *t.vol + 1;
  else if (ok && slices != 1)
    vol = voluntary(t, tid);
  if (ordered && t.resumed) {
    const uint64_t wait = now.wait - t.acct.wait, cpu = now.cpu - t.acct.cpu;
    const uint64_t ran = cpu > trap_cost_ ? cpu - trap_cost_ : 0;
    // Ran once: its one wait was the resume's. Preempted but never asleep: every moment
    // off the CPU was a wait for it; the resume's is the first, when a probe saw it (else it
    // stays in the call).
    const bool once = slices == 1;
    const bool awake = once || (vol && t.vol && *vol == *t.vol + 1);
    const uint64_t at = t.resumed_at + wait + ran;
    // The two clocks (the scheduler's and CLOCK_MONOTONIC) may drift apart by a little: the
    // stop is never dated after gotap saw it.
    if (awake && at <= taken) {
      s.at = at;
      s.exact = true;
      s.resumed_late = once ? wait : std::min(wait, t.first_wait.value_or(0));
      s.resumed_at = t.resumed_at;
      s.resumed_goid = t.goid;
      ++exact_;
    }
  }
  t.resumed = false;
  t.first_wait.reset();
  t.goid.reset();
  t.vol = vol;
  t.have_acct = ok;
  if (ok) t.acct = now;
  return s;
}

void StopClock::on_resume(pid_t tid, uint64_t now, std::optional<int64_t> goid) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  it->second.resumed = true;
  it->second.resumed_at = now;
  it->second.first_wait.reset();
  if (it->second.have_acct) unprobed_.push_back(tid);
  it->second.goid = goid;
}

void StopClock::forget(pid_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  close_files(it->second);
  threads_.erase(it);
}

}  // namespace gotap::ptrace
