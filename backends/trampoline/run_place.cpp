// Run's patch: launch or attach, map the pages, write the trampolines, then the jumps with
// every thread stopped (run.h).
#include "backends/trampoline/run.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "backends/trampoline/dead_pages.h"
#include "backends/trampoline/owner.h"
#include "core/plan/image_identity.h"
#include "core/sys/proc_maps.h"
#include "core/sys/spawn.h"
#include "core/sys/timing.h"
#include "core/sys/uprobe_holders.h"

namespace gotap::trampoline {

using ptrace::Process;

Result<void> Run::place() {
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
  // Test hook (test_runtime_inject_death.cpp): a gotap killed at any step of the system
  // calls it runs in the program (mmap, madvise, munmap) leaves it running as before.
  proc_->set_inject_phase("attach");
  // Whatever fails from here lets the program go as it was: a launched one is killed (it
  // has not run), an attached one detached.
  auto give_up = [&](Error e) -> Error {
    if (launched_) {
      kill(pid_, SIGKILL);
      (void)sys::end_child(pid_, 0);
    } else {
      proc_->detach_all(ptrace::trap_unchanged, held);
    }
    return e;
  };
  const auto bias = plan_.binary_view.load_bias(pid_);
  if (const std::string what = image_mismatch(pid_, elf, bias, proc_->mem()); !what.empty())
    return give_up(launched_ ? runtime_error("{} is not the file that was planned ({}); nothing "
                                             "was written",
                                             opts_.target.argv[0], what)
                             : exec_refusal());
  if (!bias) return give_up(runtime_error("cannot find where pid {} loaded {}", pid_, elf.path()));
  bias_ = *bias;
  if (launched_) {
    auto l = lock_image(sys::ImageLock::kPlaceWaitMs, true);
    if (!l) return give_up(l.error());
    lock = std::move(*l);
  } else if (auto r = proc_->interrupt_and_wait(held); !r) {
    proc_->detach_all(ptrace::trap_unchanged);
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
  std::vector<LiveSite> planned;
  for (const Patch& p : set_.patches) {
    planned.push_back(live_site(p, bias_));
    held_elsewhere += site_now(proc_->mem(), planned.back(), dead) == SiteNow::Foreign;
  }
  // Held by other uprobes alone, which the kernel shares: an attached program's functions go
  // on uprobes of this run's, beside them.
  if (held_elsewhere == set_.patches.size() && falls_back_ && !launched_) {
    std::vector<const LiveSite*> sites;
    for (const LiveSite& l : planned) sites.push_back(&l);
    if (held_functions(sites, dead).by_others.empty()) {
      proc_->detach_all(ptrace::trap_unchanged, held);
      fmt::print(stderr,
                 "gotap: every site is another tracer's uprobe in pid {}: every function {} on "
                 "kernel uprobes (eBPF) instead, beside them\n",
                 pid_, done());
      all_on_uprobes_ = true;
      return {};
    }
  }
  if (held_elsewhere == set_.patches.size())
    return give_up(runtime_error(
        "every site is another tracer's (a uprobe, a debugger's int3, another gotap's jump) "
        "in pid {}; nothing was written",
        pid_));
  const char* e = getenv("GOTAP_TRAMPOLINE_EMPTY");
  const bool empty = e && strcmp(e, "1") == 0;
  size_t no_room = 0;
  std::string no_room_why;
  // The regions with a fixed place that is taken: a killed gotap's pages may be there, which
  // are looked at with every thread stopped (dead_pages.h).
  std::vector<std::unique_ptr<Mapped>> pending;
  std::vector<size_t> body_len;
  if (fails_counted_)
    for (size_t i = 0; i < set_.patches.size(); ++i) {
      const Patch& p = set_.patches[i];
      body_len.push_back(
          p.ret ? ret_fail_body_size(p.site, Bytes(p.orig.data(), p.site.len), fail_words_[i])
                : entry_count_body_size(p.site));
    }
  if (trace_sites_)
    for (size_t i = 0; i < set_.patches.size(); ++i) {
      const Patch& p = set_.patches[i];
      const RecordCapture* cap = &trace_sites_->captures[i];
      body_len.push_back(p.ret ? ret_body_size(p.site, Bytes(p.orig.data(), p.site.len), cap)
                               : entry_body_size(p.site, cap));
    }
  std::vector<Region> regions =
      timed_ ? lay_out_timed(set_, bias_, body_len, ring_shape()) : lay_out(set_, bias_);
  if (regions.empty())
    return give_up(
        runtime_error("the text of pid {} is too large for the timed trampolines' "
                      "fixed places; nothing was written",
                      pid_));
  // A timed run's bodies and ring have one place (lay_out_timed): the stubs are written
  // for it before it is mapped, which may wait for a killed gotap's pages to go.
  if (timed_) {
    const Region& e = regions.front();
    timed_code_.events = {e.base + e.code_size() + e.ring_offset(),
                          plan_.offsets.g_goid,
                          plan_.offsets.g_stack_hi,
                          e.ring_shape,
                          plan_.offsets.g_m,
                          plan_.offsets.m_procid};
    if (trace_sites_) timed_code_.captures = &trace_sites_->captures;
    if (fails_counted_) timed_code_.fail_words = &fail_words_;
    timed_code_.bodies.assign(set_.patches.size(), 0);
    for (size_t k = 0; k < e.patches.size(); ++k)
      timed_code_.bodies[e.patches[k]] = e.base + e.body[k];
  }
  for (Region& r : regions) {
    auto m = std::make_unique<Mapped>();
    m->region = std::move(r);
    const Region& g = m->region;
    if (g.ring) m->pages.writable();
    auto mapped = g.base ? m->pages.map_at(*proc_, held, syscall_at_, g.base, g.base, g.code_size(),
                                           g.counter_size())
                         : m->pages.map(*proc_, held, syscall_at_, image_lo_, image_hi_,
                                        g.code_size(), g.counter_size());
    if (mapped && g.ring) ring_ = m->pages.view() + g.ring_offset();
    if (!mapped) {
      if (!g.base) return give_up(unmap_all(held, mapped.error()));
      no_room_why = mapped.error().what();
      pending.push_back(std::move(m));
      continue;
    }
    if (auto w = write_trampolines(*m, empty); !w) {
      m->pages.unmap(*proc_, held, syscall_at_);
      return give_up(unmap_all(held, w.error()));
    }
    mapped_.push_back(std::move(m));
  }
  if (mapped_.empty() && pending.empty())
    return give_up(runtime_error("no trampoline could be mapped in pid {}", pid_));
  sys::timing_mark("trampoline: pages mapped and written");
  // From before the jumps are written: an exec once they are cannot go unseen.
  exec_.start(pid_);
  bool all_held = false, no_bodies = false;
  WriteTally t;
  const IsOurs ours = left_by_a_gotap();  // the maps again: with the threads stopped
  size_t taken_back = 0, planned_sites = 0;
  std::vector<int> out_of_place;
  proc_->detach_all(ptrace::trap_unchanged, held, [&](const std::vector<pid_t>& stopped) {
    all_held = true;
    for (auto& m : pending) {
      taken_back += take_place(*m, held, stopped, ours, elf, empty);
      if (m->pages.code()) mapped_.push_back(std::move(m));
    }
    std::erase(pending, nullptr);
    // Without its bodies' region, a timed run writes no jump at all (the stubs would lead
    // nowhere).
    if (timed_ && !ring_) {
      no_bodies = true;
      return;
    }
    // A timed function is patched whole or not at all: a site another tracer holds leaves
    // out its function's other sites too (an entry with no return would stay open), and so
    // does a one-byte jump whose stub has no place (its region's place is taken, or
    // lay_out_timed found none).
    // Before a timed run leaves out the sites of functions it cannot patch whole.
    planned_sites = site_count();
    if (timed_) {
      std::vector<const Region*> placed;
      for (const auto& m : mapped_) placed.push_back(&m->region);
      const std::vector<int> out = stubless_functions(set_, placed);
      out_of_place = out;
      stubless_ = out.size();
      drop_functions(std::set<int>(out.begin(), out.end()));
      t.foreign += drop_held_functions(ours);
    }
    for (auto& m : mapped_) {
      const WriteTally w = write_jumps(proc_->mem(), m->sites, ours);
      t.written += w.written;
      t.foreign += w.foreign;
      t.failed += w.failed;
      t.replaced += w.replaced;
    }
    // A count's one site a function, written or held: those held by uprobes alone go on
    // this run's uprobes, beside them.
    if (!timed_) {
      std::vector<const LiveSite*> unwritten;
      for (const auto& m : mapped_)
        for (const LiveSite& l : m->sites)
          if (!l.written) unwritten.push_back(&l);
      uprobe_held_ = held_functions(unwritten, ours).by_uprobes;
      t.foreign -= std::min(t.foreign, drop_functions(uprobe_held_));
    }
    // A launched program runs its first instruction only once the uprobes are live too:
    // placed under this run's lock of the file.
    // And count's short functions whose region has no room at its place.
    if (timed_) {
      stubless_funcs_ = out_of_place;
    } else {
      for (const auto& m : pending)
        for (size_t k : m->region.patches) stubless_funcs_.push_back(set_.patches[k].func);
    }
    if (launched_) start_fallback(true);
  });
  lock.release();
  if (!launched_ && all_held && !no_bodies && !proc_->exec_seen()) start_fallback(false);
  sys::timing_mark("trampoline: jumps written");
  if (taken_back)
    fmt::print(stderr,
               "gotap: took back {} jump{} left in pid {} by a gotap that was killed, and its "
               "pages, whose place this one's trampolines take\n",
               taken_back, taken_back == 1 ? "" : "s", pid_);
  if (no_bodies) {
    const std::string why = fmt::format(
        "the place of the RETs' trampolines in pid {} is taken ({}); nothing was patched", pid_,
        no_room_why);
    // An attached program's functions all go on uprobes instead (a mapping there that no
    // header names: one a gotap killed while it mapped its pages left, or the program's own).
    if (!falls_back_ || launched_) return end_unpatched(runtime_error("{}", why));
    fmt::print(stderr, "gotap: warning: {}: every function on kernel uprobes (eBPF) instead\n",
               why);
    all_on_uprobes_ = true;
    return {};
  }
  if (timed_ && stubless_ && !fallback_)
    fmt::print(stderr,
               "gotap: warning: {} function{} not {}: a trampoline {} has no room at its "
               "fixed place (taken, or out of the address space or of reach){}\n",
               stubless_, stubless_ == 1 ? " is" : "s are", done(),
               stubless_ == 1 ? "it needs" : "they need",
               no_room_why.empty() ? "" : " (" + no_room_why + ")");
  // A timed run said it above, by function.
  if (!timed_ && !fallback_)
    for (const auto& m : pending) {
      no_room = m->region.patches.size();
      fmt::print(stderr, "gotap: warning: {} short function{} not counted: {}\n", no_room,
                 no_room == 1 ? " is" : "s are", no_room_why);
    }
  if (proc_->exec_seen()) return exec_refusal();
  // Nothing was written: the pages stay (no thread is held to unmap them), unused. A
  // launched program ends with its trace, as ever.
  if (!all_held)
    return end_unpatched(
        runtime_error("cannot stop every thread of pid {} to patch it; nothing was patched", pid_));
  placed_ = t.written;
  std::set<int> funcs;
  for (const auto& m : mapped_)
    for (const LiveSite& l : m->sites)
      if (l.written) funcs.insert(l.func);
  funcs_placed_ = funcs.size();
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
               t.foreign, planned_sites);
  // With no jump, the uprobes may still trace all there is (every function needed a stub
  // with no room). Without them the pages go: no jump leads into them.
  if (!placed_ && !fallback_) {
    if (!launched_) (void)release_pages_again();
    return end_unpatched(
        runtime_error("no site of pid {} could be patched ({} another tracer's, {} not "
                      "written)",
                      pid_, t.foreign, t.failed));
  }
  pidfd_ = sys::Fd(static_cast<int>(syscall(SYS_pidfd_open, pid_, 0)));
  return {};
}

// From how many functions and inlined copies on uprobes start_fallback warns of their cost.
constexpr size_t kManyUprobes = 100;

void Run::start_fallback(bool image_locked) {
  if (!falls_back_) return;
  std::vector<int> funcs = refused_functions(set_);
  funcs.insert(funcs.end(), stubless_funcs_.begin(), stubless_funcs_.end());
  funcs.insert(funcs.end(), uprobe_held_.begin(), uprobe_held_.end());
  std::sort(funcs.begin(), funcs.end());
  // The inlined copies of the functions the jumps take (not timed: they have no return).
  std::vector<int> copies;
  if (opts_.mode == Mode::Count || traced_)
    for (const Patch& p : set_.patches) {
      const FuncPlan& f = plan_.funcs[p.func];
      if (!p.ret && f.inline_probed && !f.inline_sites.empty() &&
          !std::binary_search(funcs.begin(), funcs.end(), p.func))
        copies.push_back(p.func);
    }
  // --why and --goroutines: the goroutine probes are this session's (goroutine_probes_).
  if (funcs.empty() && copies.empty() && !goroutine_probes_) return;
  std::function<void(uint64_t)> on_read;
  if (merge_)
    on_read = [m = merge_.get()](uint64_t t) {
      m->mark(1, t);
      m->source(1).flush();
    };
  auto f = Fallback::start(plan_, funcs, copies, uprobe_options(), pid_, image_locked,
                           merge_ ? merge_->source(1) : sink_, std::move(on_read));
  const size_t n = stubless_funcs_.size();
  // "3 of 10 functions have no trampoline site and are timed ... (why: which)", and the
  // functions whose stub had no room, which lay_out_timed found only now.
  const auto said = [&](const char* instead) {
    const std::string no_room =
        fmt::format("{} function{} whose trampoline{} no room at {} fixed place", n,
                    n == 1 ? "" : "s", n == 1 ? " has" : "s have", n == 1 ? "its" : "their");
    if (set_.refused.empty())
      return fmt::format("{} {} {}{}", no_room, n == 1 ? "is" : "are", instead ? "" : "not ",
                         instead ? fmt::format("{} on {}", done(), instead) : done());
    std::string s = refused_summary(set_, plan_, done(), instead);
    return n ? s + fmt::format(", and so {} {}", n == 1 ? "is" : "are", no_room) : s;
  };
  // Those no jump takes for want of a site or a place, apart from those another uprobe holds.
  const bool unjumpable = !set_.refused.empty() || n;
  const size_t h = uprobe_held_.size();
  const auto held_said = [&](bool taken) {
    return fmt::format("{} function{} whose site{} another tracer's uprobe holds {} {}", h,
                       h == 1 ? "" : "s", h == 1 ? "" : "s", h == 1 ? "is" : "are",
                       taken ? fmt::format("{} on kernel uprobes (eBPF), beside it", done())
                             : fmt::format("not {}", done()));
  };
  if (!f) {
    fallback_error_ = f.error().what();
    if (goroutine_probes_) return;  // run() ends the run: its request cannot be met
    if (unjumpable)
      fmt::print(stderr, "gotap: warning: {}: kernel uprobes could not take them: {}\n",
                 said(nullptr), fallback_error_);
    if (h)
      fmt::print(stderr, "gotap: warning: {}: kernel uprobes could not take them: {}\n",
                 held_said(false), fallback_error_);
    if (!copies.empty())
      fmt::print(stderr,
                 "gotap: warning: the inlined copies of {} function{} are not {}: kernel uprobes "
                 "could not take them: {}\n",
                 copies.size(), copies.size() == 1 ? "" : "s", done(), fallback_error_);
    return;
  }
  fallback_ = std::move(*f);
  if (unjumpable) fmt::print(stderr, "gotap: {}\n", said("kernel uprobes (eBPF) instead"));
  if (h) fmt::print(stderr, "gotap: {}\n", held_said(true));
  if (const size_t n = fallback_->inlined_copies())
    fmt::print(stderr,
               "gotap: the {} inlined cop{} of {} function{} the jumps take {} {} on kernel "
               "uprobes (eBPF)\n",
               n, n == 1 ? "y" : "ies", copies.size(), copies.size() == 1 ? "" : "s",
               n == 1 ? "is" : "are", done());
  // Many uprobes cost a whole binary most of what eBPF would (docs/benchmarks.md): said,
  // with the way to leave them out.
  if (const size_t n = funcs.size() + fallback_->inlined_copies(); n >= kManyUprobes)
    fmt::print(stderr,
               "gotap: warning: {} functions and inlined copies on kernel uprobes cost what "
               "eBPF's probes cost, most of this trace's cost when they are hot "
               "(--jumps-only leaves them out)\n",
               n);
}

Result<void> Run::write_trampolines(Mapped& m, bool empty) {
  auto code =
      timed_
          ? build_timed(set_, m.region, bias_, m.pages.code(), self_owner(), timed_code_, m.sites)
          : build_trampolines(set_, m.region, bias_, m.pages.code(), self_owner(), m.sites, empty);
  if (!code) return code.error();
  for (const auto& [off, len] : code->runs)
    if (!proc_->mem().write(m.pages.code() + off, code->bytes.data() + off, len))
      return runtime_error("cannot write the trampolines into pid {}", pid_);
  return {};
}

size_t Run::take_place(Mapped& m, pid_t held, const std::vector<pid_t>& stopped, const IsOurs& dead,
                       const ElfFile& elf, bool empty) {
  const Region& g = m.region;
  const auto maps = sys::read_maps(pid_);
  auto pages = dead_pages_in(maps, proc_->mem(), g.base, g.base + g.code_size() + g.counter_size(),
                             stopped, dead);
  if (!pages) return 0;
  // A timed run's bodies: every killed gotap's regions go (dead_pages.h).
  if (g.ring && !pages->empty()) pages = every_dead_region(maps, proc_->mem(), stopped, dead);
  if (!pages) return 0;
  size_t taken = 0;
  if (!pages->empty()) {
    size_t failed = 0;
    taken = take_back_jumps_into(proc_->mem(), elf, bias_, *pages, failed);
    if (failed) return taken;
    for (const auto& [lo, hi] : *pages) {
      auto r = proc_->inject_syscall(held, syscall_at_, SYS_munmap, {lo, hi - lo});
      if (!r || ptrace::syscall_failed(*r)) return taken;
    }
  }
  if (!m.pages.map_at(*proc_, held, syscall_at_, g.base, g.base, g.code_size(), g.counter_size()))
    return taken;
  if (g.ring) ring_ = m.pages.view() + g.ring_offset();
  if (!write_trampolines(m, empty)) {
    m.pages.unmap(*proc_, held, syscall_at_);
    if (g.ring) ring_ = nullptr;
  }
  return taken;
}

Run::HeldFunctions Run::held_functions(const std::vector<const LiveSite*>& sites,
                                       const IsOurs& ours) {
  HeldFunctions h;
  std::optional<std::map<uint64_t, std::string>> holders;
  const ElfFile& elf = *plan_.binary_view.elf;
  const auto to_offset = [&](uint64_t at) -> std::optional<uint64_t> {
    return at >= bias_ ? elf.vaddr_to_offset(at - bias_) : std::nullopt;
  };
  for (const LiveSite* l : sites) {
    if (l->written) continue;
    const SiteNow now = site_now(proc_->mem(), *l, ours);
    if (now == SiteNow::File || now == SiteNow::Ours) continue;
    // Only a held site is told apart, and the uprobes listed once, when one is.
    bool uprobes = falls_back_ && now == SiteNow::Foreign;
    if (uprobes && !holders) holders = sys::uprobe_holders(fmt::format("/proc/{}/exe", pid_), pid_);
    uprobes = uprobes && held_by_uprobes(proc_->mem(), *l, *holders, to_offset);
    (uprobes ? h.by_uprobes : h.by_others).insert(l->func);
  }
  for (int f : h.by_others) h.by_uprobes.erase(f);
  return h;
}

size_t Run::drop_held_functions(const IsOurs& ours) {
  std::vector<const LiveSite*> sites;
  for (const auto& m : mapped_)
    for (const LiveSite& l : m->sites) sites.push_back(&l);
  const HeldFunctions h = held_functions(sites, ours);
  // Those on this run's uprobes beside the others' are not counted as left to them.
  uprobe_held_ = h.by_uprobes;
  drop_functions(uprobe_held_);
  return drop_functions(h.by_others);
}

size_t Run::drop_functions(const std::set<int>& funcs) {
  size_t dropped = 0;
  if (funcs.empty()) return 0;
  for (auto& m : mapped_)
    std::erase_if(m->sites, [&](const LiveSite& l) {
      const bool out = funcs.count(l.func) != 0;
      dropped += out;
      return out;
    });
  return dropped;
}

IsOurs Run::left_by_a_gotap() {
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

Error Run::unmap_all(pid_t held, Error e) {
  for (auto& m : mapped_) m->pages.unmap(*proc_, held, syscall_at_);
  mapped_.clear();
  ring_ = nullptr;  // gotap's view went with its region
  return e;
}

Error Run::exec_refusal() const {
  return runtime_error(
      "pid {} changed its program (exec) between planning and attach; nothing was written", pid_);
}

}  // namespace gotap::trampoline
