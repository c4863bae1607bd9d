// The trampoline backend (docs/design.md, "Probes without a trap"): `gotap count` with no trap
// per call. Each counted function's stack-check `jbe` becomes a jump to a trampoline that
// takes the same branch to morestack, adds one to the function's counter with `lock inc`,
// and jumps back. gotap holds the program only while it patches and while it unpatches
// (every thread stopped with ptrace); in between the program runs detached, its calls cost
// a few nanoseconds, and gotap reads the counters from memory it shares with the program.
//
// Safety, as with the other backends: the patched bytes hold no pc a thread, a parked
// goroutine or a signal frame can resume at (site_patches.h, jump_site.h), so a patch is one
// write per site with the threads stopped. A gotap killed at any point leaves a program that
// runs as before: the jumps and the trampolines stay, and count on.
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "backends/ptrace/page_release.h"
#include "backends/ptrace/process.h"
#include "backends/trampoline/dead_pages.h"
#include "backends/trampoline/exec_watch.h"
#include "backends/trampoline/owner.h"
#include "backends/trampoline/patch_set.h"
#include "backends/trampoline/program_pages.h"
#include "backends/trampoline/register.h"
#include "backends/trampoline/site_patches.h"
#include "core/backend.h"
#include "core/binary/elf_file.h"
#include "core/events/live_metrics.h"
#include "core/events/typed_events.h"
#include "core/plan/image_identity.h"
#include "core/sys/fd.h"
#include "core/sys/image_lock.h"
#include "core/sys/proc_maps.h"
#include "core/sys/proc_status.h"
#include "core/sys/spawn.h"
#include "core/sys/timing.h"

namespace gotap::trampoline {

namespace {

using ptrace::Process;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool no_fix(pid_t, user_regs_struct&) {
  return false;
}

class Run {
 public:
  Run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink)
      : plan_(plan), opts_(opts), sink_(sink) {}

  Result<void> run() {
    GOTAP_TRY(check_request());
    set_ = plan_patches(plan_);
    const std::string refused = refused_summary(set_, plan_);
    if (set_.patches.empty())
      return make_error("--backend=trampoline: nothing to count: {}; --backend=ebpf counts them",
                        refused);
    if (!refused.empty())
      fmt::print(stderr, "gotap: warning: {}; --backend=ebpf counts them\n", refused);
    size_t inlined = 0;
    for (const Patch& p : set_.patches)
      if (plan_.funcs[p.func].inline_probed) inlined += plan_.funcs[p.func].inline_sites.size();
    if (inlined)
      fmt::print(stderr,
                 "gotap: warning: the trampoline backend counts calls of the functions' own "
                 "code, not their {} inlined cop{} (--backend=ebpf counts those too)\n",
                 inlined, inlined == 1 ? "y" : "ies");
    GOTAP_TRY(place());
    const uint64_t t0 = now_ns();
    fmt::print(
        stderr, "{}\n",
        tracing_banner(set_.patches.size(), placed_, "trampoline", fmt::format("pid {}", pid_)));
    std::fflush(stderr);
    if (opts_.metrics) opts_.metrics->begin(pid_, [this](MetricsSnapshot& s) { read_metrics(s); });
    wait(t0);
    const uint64_t ended = now_ns();
    sys::timing_mark("trampoline: traced");
    if (ended_by_ == "stop") {
      remove();
      sys::timing_mark("trampoline: detached");
    }
    if (opts_.metrics) opts_.metrics->end();
    if (launched_) end_launched();
    emit(ended);
    if (!remove_error_.empty())
      return runtime_error("the trampolines stay in pid {}, where they go on counting: {}", pid_,
                           remove_error_);
    return {};
  }

 private:
  const ProbePlan& plan_;
  const TraceOptions& opts_;
  EventSink& sink_;
  PatchSet set_;
  std::unique_ptr<Process> proc_;
  // One per region (patch_set.h): its pages in the program and its sites.
  struct Mapped {
    Region region;
    ProgramPages pages;
    std::vector<LiveSite> sites;
    bool jumps_left = false;  // a restore that failed: the pages stay for good
  };
  std::vector<std::unique_ptr<Mapped>> mapped_;
  pid_t pid_ = 0;
  bool launched_ = false;
  uint64_t bias_ = 0, syscall_at_ = 0, image_lo_ = UINT64_MAX, image_hi_ = 0;
  size_t placed_ = 0, foreign_ = 0, restored_ = 0, left_ = 0, taken_ = 0;
  bool pages_kept_ = false;
  std::string ended_by_ = "stop", remove_error_;
  std::optional<int> exit_code_, exit_signal_;
  sys::Fd pidfd_;
  ExecWatch exec_;

  Result<void> check_request() const {
    const char* no = nullptr;
    if (opts_.mode != Mode::Count)
      no = "counts calls only (gotap count): trace, latency, graph and goroutines need ptrace or "
           "ebpf";
    else if (opts_.condition)
      no = "takes no --if, --slower or --errors yet";
    else if (plan_.goroutines.status || plan_.goroutines.walk)
      no = "has no goroutine events or --why yet";
    else if (!plan_.reads_g || !plan_.binary_view.pclntab)
      no = "needs a program built by gc (gccgo has no stack check it can use)";
    else if (opts_.target.all || opts_.target.library)
      no = "takes one process: -p PID or -- CMD";
    else if (opts_.target.pid <= 0 && opts_.target.argv.empty())
      no = "needs a target: -p PID or -- CMD ARGS";
    else if (opts_.stack_depth > 0)
      no = "has no --stack";
    if (no) return make_error("--backend=trampoline {}", no);
    if (!plan_.binary_view.elf) return make_error("the plan names no binary (GoBinary::plan)");
    return {};
  }

  // The executable's lock, which every gotap holds while it looks at sites and writes them
  // (core/sys/image_lock.h); `abortable`: a stop request ends the wait.
  Result<sys::ImageLock> lock_image(int wait_ms, bool abortable) const {
    return sys::ImageLock::take(fmt::format("/proc/{}/exe", pid_), plan_.binary_view.elf->path(),
                                wait_ms, abortable ? &stop_requested() : nullptr);
  }

  Error exec_refusal() const {
    return runtime_error(
        "pid {} changed its program (exec) between planning and attach; nothing was written", pid_);
  }

  // Launches or attaches, maps the pages, writes the trampolines, then the jumps with every
  // thread stopped, and lets the program go.
  Result<void> place() {
    auto abort = [] { return stop_requested().load(); };
    const ElfFile& elf = *plan_.binary_view.elf;
    sys::ImageLock lock;
    pid_t held = 0;
    if (!opts_.target.argv.empty()) {
      auto p = Process::launch(opts_.target.argv, abort);
      if (!p) return p.error();
      proc_ = std::move(*p);
      launched_ = true;
      pid_ = held = proc_->pid();
    } else {
      pid_ = opts_.target.pid;
      auto l = lock_image(sys::ImageLock::kPlaceWaitMs, true);
      if (!l) return l.error();
      lock = std::move(*l);
      auto p = Process::attach(pid_, abort);
      if (!p) return p.error();
      proc_ = std::move(*p);
      held = proc_->threads().count(pid_) ? pid_ : *proc_->threads().begin();
    }
    // Whatever fails from here lets the program go as it was: a launched one is killed (it
    // has not run), an attached one detached.
    auto give_up = [&](Error e) -> Error {
      if (launched_) {
        kill(pid_, SIGKILL);
        (void)sys::end_child(pid_, 0);
      } else {
        proc_->detach_all(no_fix, held);
      }
      return e;
    };
    const auto bias = plan_.binary_view.load_bias(pid_);
    if (const std::string what = image_mismatch(pid_, elf, bias, proc_->mem()); !what.empty())
      return give_up(launched_ ? runtime_error("{} is not the file that was planned ({}); nothing "
                                               "was written",
                                               opts_.target.argv[0], what)
                               : exec_refusal());
    if (!bias)
      return give_up(runtime_error("cannot find where pid {} loaded {}", pid_, elf.path()));
    bias_ = *bias;
    if (launched_) {
      auto l = lock_image(sys::ImageLock::kPlaceWaitMs, true);
      if (!l) return give_up(l.error());
      lock = std::move(*l);
    } else if (auto r = proc_->interrupt_and_wait(held); !r) {
      proc_->detach_all(no_fix);
      return proc_->exec_seen() ? exec_refusal() : r.error();
    }
    for (const auto& seg : elf.segments()) {
      if (seg.type != 1 /* PT_LOAD */) continue;
      image_lo_ = std::min(image_lo_, seg.vaddr + bias_);
      image_hi_ = std::max(image_hi_, seg.vaddr + seg.memsz + bias_);
    }
    syscall_at_ = elf.entry() + bias_;
    // Nothing is mapped when no site is free (another gotap traces the same functions): its
    // pages would stay in the program, unused. The look is repeated with the threads stopped.
    size_t held_elsewhere = 0;
    const IsOurs dead = left_by_a_gotap();
    for (const Patch& p : set_.patches)
      held_elsewhere += site_now(proc_->mem(), live_site(p, bias_), dead) == SiteNow::Foreign;
    if (held_elsewhere == set_.patches.size())
      return give_up(runtime_error(
          "every site is another tracer's (a uprobe, a debugger's int3, another gotap's jump) "
          "in pid {}; nothing was written",
          pid_));
    const char* e = getenv("GOTAP_TRAMPOLINE_EMPTY");
    const bool empty = e && strcmp(e, "1") == 0;
    size_t no_room = 0;
    std::string no_room_why;
    // The short checks' region when its place is taken: a killed gotap's pages may be there,
    // which are looked at with every thread stopped (dead_pages.h).
    std::unique_ptr<Mapped> pending;
    for (Region& r : lay_out(set_, bias_)) {
      auto m = std::make_unique<Mapped>();
      m->region = std::move(r);
      const Region& g = m->region;
      auto mapped = g.base ? m->pages.map_at(*proc_, held, syscall_at_, g.base, g.base,
                                             g.code_size(), g.counter_size())
                           : m->pages.map(*proc_, held, syscall_at_, image_lo_, image_hi_,
                                          g.code_size(), g.counter_size());
      if (!mapped) {
        if (!g.base) return give_up(unmap_all(held, mapped.error()));
        no_room_why = mapped.error().what();
        pending = std::move(m);
        continue;
      }
      if (auto w = write_trampolines(*m, empty); !w) {
        m->pages.unmap(*proc_, held, syscall_at_);
        return give_up(unmap_all(held, w.error()));
      }
      mapped_.push_back(std::move(m));
    }
    if (mapped_.empty() && !pending)
      return give_up(runtime_error("no trampoline could be mapped in pid {}", pid_));
    sys::timing_mark("trampoline: pages mapped and written");
    // From before the jumps are written: an exec once they are cannot go unseen.
    exec_.start(pid_);
    bool all_held = false;
    WriteTally t;
    const IsOurs ours = left_by_a_gotap();  // the maps again: with the threads stopped
    size_t taken_back = 0;
    proc_->detach_all(no_fix, held, [&](const std::vector<pid_t>& stopped) {
      all_held = true;
      if (pending) {
        taken_back = take_place(*pending, held, stopped, ours, elf, empty);
        if (pending->pages.code()) mapped_.push_back(std::move(pending));
      }
      for (auto& m : mapped_) {
        const WriteTally w = write_jumps(proc_->mem(), m->sites, ours);
        t.written += w.written;
        t.foreign += w.foreign;
        t.failed += w.failed;
        t.replaced += w.replaced;
      }
    });
    lock.release();
    sys::timing_mark("trampoline: jumps written");
    if (taken_back)
      fmt::print(stderr,
                 "gotap: took back {} jump{} left in pid {} by a gotap that was killed, and its "
                 "pages, whose place this one's trampolines take\n",
                 taken_back, taken_back == 1 ? "" : "s", pid_);
    if (pending) {
      no_room = pending->region.patches.size();
      fmt::print(stderr, "gotap: warning: {} short function{} not counted: {}\n", no_room,
                 no_room == 1 ? " is" : "s are", no_room_why);
    }
    if (proc_->exec_seen()) return exec_refusal();
    // Nothing was written: the pages stay (no thread is held to unmap them), unused. A
    // launched program ends with its trace, as ever.
    if (!all_held)
      return end_unpatched(runtime_error(
          "cannot stop every thread of pid {} to patch it; nothing was patched", pid_));
    placed_ = t.written;
    foreign_ = t.foreign;
    if (t.replaced)
      fmt::print(stderr,
                 "gotap: replaced {} jump{} left in pid {} by a gotap that was killed (its pages "
                 "stay, unused)\n",
                 t.replaced, t.replaced == 1 ? "" : "s", pid_);
    if (t.foreign)
      fmt::print(stderr,
                 "gotap: warning: {} of {} sites are another tracer's (a uprobe or a debugger's "
                 "int3 there): left to it, not counted\n",
                 t.foreign, site_count());
    if (!placed_)
      return end_unpatched(
          runtime_error("no site of pid {} could be patched ({} another tracer's, {} not "
                        "written)",
                        pid_, t.foreign, t.failed));
    pidfd_ = sys::Fd(static_cast<int>(syscall(SYS_pidfd_open, pid_, 0)));
    return {};
  }

  // Fills m's pages (mapped already) with its trampolines.
  Result<void> write_trampolines(Mapped& m, bool empty) {
    auto code =
        build_trampolines(set_, m.region, bias_, m.pages.code(), self_owner(), m.sites, empty);
    if (!code) return code.error();
    for (const auto& [off, len] : code->runs)
      if (!proc_->mem().write(m.pages.code() + off, code->bytes.data() + off, len))
        return runtime_error("cannot write the trampolines into pid {}", pid_);
    return {};
  }

  // With every thread stopped: when a killed gotap's pages hold the place of m's (short
  // checks') trampolines, takes back every jump into them, removes them and maps m's there.
  // The jumps taken back; m's pages stay unplaced when it cannot.
  size_t take_place(Mapped& m, pid_t held, const std::vector<pid_t>& stopped, const IsOurs& dead,
                    const ElfFile& elf, bool empty) {
    const Region& g = m.region;
    const auto pages = dead_pages_in(sys::read_maps(pid_), proc_->mem(), g.base,
                                     g.base + g.code_size() + g.counter_size(), stopped, dead);
    if (!pages || pages->empty()) return 0;
    size_t failed = 0;
    const size_t taken = take_back_jumps_into(proc_->mem(), elf, bias_, *pages, failed);
    if (failed) return taken;
    for (const auto& [lo, hi] : *pages) {
      auto r = proc_->inject_syscall(held, syscall_at_, SYS_munmap, {lo, hi - lo});
      if (!r || ptrace::syscall_failed(*r)) return taken;
    }
    if (!m.pages.map_at(*proc_, held, syscall_at_, g.base, g.base, g.code_size(), g.counter_size()))
      return taken;
    if (!write_trampolines(m, empty)) m.pages.unmap(*proc_, held, syscall_at_);
    return taken;
  }

  // With every thread in `stopped` stopped: unmaps each region no jump is left to and no
  // thread can be in or return into (page_release.h). Whether none is left.
  bool release_pages(pid_t held, const std::vector<pid_t>& stopped) {
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

  // Attaches again to release what release_pages kept; whether none is left.
  bool release_pages_again() {
    proc_.reset();
    auto p = Process::attach(pid_, nullptr);
    if (!p) return ::kill(pid_, 0) != 0;  // gone: so are its pages
    proc_ = std::move(*p);
    if (proc_->threads().empty()) return false;
    const pid_t held = proc_->threads().count(pid_) ? pid_ : *proc_->threads().begin();
    if (!proc_->interrupt_and_wait(held)) {
      proc_->detach_all(no_fix);
      return false;
    }
    if (proc_->exec_seen()) {  // the pages went with the old image
      proc_->detach_all(no_fix, held);
      return true;
    }
    bool released = false;
    proc_->detach_all(no_fix, held, [&](const std::vector<pid_t>& stopped) {
      released = release_pages(held, stopped);
    });
    return released;
  }

  // After the detach, a failure with nothing patched: a launched program is ended as a
  // trace's end ends it (sys::end_child); an attached one runs on.
  Error end_unpatched(Error e) {
    if (launched_) (void)sys::end_child(pid_);
    return e;
  }

  bool stop_due(uint64_t t0) const {
    return stop_requested().load() ||
           (opts_.duration_s > 0 && now_ns() - t0 >= uint64_t(opts_.duration_s * 1e9));
  }

  // Whether the program still has the trampolines: after an exec the address is gone.
  bool still_patched() const {
    uint8_t b = 0;
    iovec local{&b, 1}, remote{reinterpret_cast<void*>(mapped_[0]->pages.code()), 1};
    return process_vm_readv(pid_, &local, 1, &remote, 1, 0) == 1;
  }

  // Whether a jump's target is a slot in the pages of a gotap that is gone (killed): an
  // executable anonymous mapping that begins with kMagic, whose owner (owner.h) no longer
  // runs. Read while the threads are stopped: the maps once, each mapping's header once.
  IsOurs left_by_a_gotap() {
    auto maps = std::make_shared<std::vector<sys::Mapping>>();
    auto magic = std::make_shared<std::map<uint64_t, bool>>();
    return [this, maps, magic](uint64_t to) {
      if (maps->empty()) *maps = sys::read_maps(pid_);
      for (const sys::Mapping& m : *maps) {
        if (to < m.start || to >= m.end) continue;
        if (m.perms != "r-xp" || m.inode != 0 || !m.path.empty()) return false;
        if (to - m.start < kHeaderSize) return false;
        auto [it, fresh] = magic->try_emplace(m.start, false);
        if (fresh) {
          const auto owner = region_owner(proc_->mem(), m.start);
          it->second = owner && !owner_alive(*owner);
        }
        return it->second;
      }
      return false;
    };
  }

  // Whether the process is gone or a zombie.
  bool exiting() const {
    const auto state = sys::status_value(pid_, 0, "State");
    return !state || state->starts_with('Z') || state->starts_with('X');
  }

  // Until the trace ends: a stop asked for, the duration out, the program gone or exec'd.
  // Meanwhile the program counts; gotap looks at its jno jumps for another tracer's uprobe
  // over one (note_uprobes), every 100 ms, or less often where a look takes over 1 ms (a
  // page read each: 8 ms for a whole caddy), so that looking takes 1% of a CPU at most.
  void wait(uint64_t t0) {
    uint64_t looked = 0, every = 100'000'000;
    for (;;) {
      if (stop_due(t0)) return;
      if (const uint64_t now = now_ns(); now - looked >= every) {
        for (auto& m : mapped_) note_uprobes(pid_, m->sites);
        looked = now_ns();
        every = std::max<uint64_t>(100'000'000, 100 * (looked - now));
      }
      pollfd p[2] = {{pidfd_.get(), POLLIN, 0}, {exec_.fd(), POLLIN, 0}};
      const int r = pidfd_ ? ::poll(p, 2, 50) : (usleep(50'000), 0);
      if (exec_.saw_exec()) {
        ended_by_ = "exec";
        return;
      }
      if ((r > 0 && (p[0].revents & POLLIN)) ||
          (!pidfd_ && ::kill(pid_, 0) != 0 && errno == ESRCH)) {
        ended_by_ = exec_.saw_exec() ? "exec" : "exit";
        return;
      }
      // Without the connector, an exec is seen as the trampolines' pages gone from a process
      // that is not exiting (an exiting one loses its memory before the pidfd says so).
      if (exec_.fd() < 0 && !still_patched() && !exiting()) {
        ended_by_ = "exec";
        return;
      }
    }
  }

  // Attaches again and takes every jump back; the pages go too, unless a thread may still
  // be in them or return into them (page_release.h).
  void remove() {
    auto lock = lock_image(sys::ImageLock::kRemoveWaitMs, false);
    if (!lock)
      fmt::print(stderr, "gotap: warning: removing the trampolines unlocked: {}\n",
                 lock.error().what());
    proc_.reset();
    auto p = Process::attach(pid_, nullptr);
    if (!p) {
      // Gone meanwhile: nothing is left to remove.
      if (::kill(pid_, 0) != 0) {
        ended_by_ = "exit";
        return;
      }
      remove_error_ = fmt::format("cannot attach to take them out: {}", p.error().what());
      return;
    }
    proc_ = std::move(*p);
    if (proc_->threads().empty()) return;
    const pid_t held = proc_->threads().count(pid_) ? pid_ : *proc_->threads().begin();
    if (auto r = proc_->interrupt_and_wait(held); !r) {
      proc_->detach_all(no_fix);
      remove_error_ = fmt::format("cannot stop thread {}: {}", held, r.error().what());
      return;
    }
    if (proc_->exec_seen() || !still_patched()) {
      proc_->detach_all(no_fix, held);
      ended_by_ = "exec";
      return;
    }
    bool all_held = false;
    WriteTally t;
    proc_->detach_all(no_fix, held, [&](const std::vector<pid_t>& stopped) {
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

  void end_launched() {
    // A program that replaced itself is still the trace's: waited for until the trace ends.
    if (ended_by_ == "exec")
      while (!stop_requested().load() && ::kill(pid_, 0) == 0) {
        siginfo_t si{};
        if (waitid(P_PID, id_t(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid) break;
        usleep(20'000);
      }
    auto e = sys::end_child(pid_);
    if (!e || e->signalled || ended_by_ != "exit") return;
    if (WIFEXITED(e->status)) {
      exit_code_ = WEXITSTATUS(e->status);
    } else if (WIFSIGNALED(e->status)) {
      exit_signal_ = WTERMSIG(e->status);
      exit_code_ = 128 + *exit_signal_;
    }
  }

  size_t site_count() const {
    size_t n = 0;
    for (const auto& m : mapped_) n += m->sites.size();
    return n;
  }

  // Each counted function's calls so far, by plan index, those called only.
  std::vector<std::pair<int, uint64_t>> counts() const {
    std::vector<std::pair<int, uint64_t>> out;
    for (const auto& m : mapped_)
      for (size_t k = 0; k < m->region.patches.size(); ++k)
        if (uint64_t n = m->pages.count(k, kCounterStride))
          out.emplace_back(set_.patches[m->region.patches[k]].func, n);
    return out;
  }

  // What unmaps every region mapped so far (an error on the way), then returns `e`.
  Error unmap_all(pid_t held, Error e) {
    for (auto& m : mapped_) m->pages.unmap(*proc_, held, syscall_at_);
    mapped_.clear();
    return e;
  }

  void read_metrics(MetricsSnapshot& s) const {
    s.pid = pid_;
    s.funcs.clear();
    for (auto [f, n] : counts()) {
      FuncMetrics m;
      m.func = plan_.funcs[f].name;
      m.calls = n;
      s.funcs.push_back(std::move(m));
    }
    s.lost = 0;
  }

  void emit(uint64_t ended) {
    std::vector<FuncCount> counts;
    for (auto [f, n] : this->counts()) counts.push_back({plan_.funcs[f].name, n, std::nullopt});
    uint64_t events = 0;
    for (auto& ev : count_events(std::move(counts))) {
      sink_.emit(std::move(ev));
      ++events;
    }
    RunSummary sum;
    sum.backend = "trampoline";
    sum.ts_ns = ended;
    sum.functions = plan_.funcs.size();
    sum.probes = placed_;
    sum.events = events;
    sum.lost = 0;  // every pass adds to its counter: nothing is dropped
    sum.pid = pid_;
    sum.ended_by = ended_by_;
    sum.exit_code = exit_code_;
    sum.exit_signal = exit_signal_;
    sum.extra = {{"not_patched", plan_.funcs.size() - placed_}, {"pages_kept", pages_kept_}};
    if (taken_) sum.extra["taken_by_uprobes"] = taken_;
    sink_.emit(to_event(sum));
    sink_.flush();
  }
};

class TrampolineBackend : public Backend {
 public:
  std::string name() const override { return "trampoline"; }
  Result<void> run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) override {
    Run r(plan, opts, sink);
    return r.run();
  }
};

std::string unavailable_reason() {
  if (::access("/proc/self/map_files", F_OK) != 0) return "/proc/PID/map_files is missing";
  return "";
}

}  // namespace

void register_trampoline_backend() {
  register_backend(
      {"trampoline", unavailable_reason, [] { return std::make_unique<TrampolineBackend>(); }});
}

}  // namespace gotap::trampoline
