#include "backends/ebpf/ebpf_backend.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "backends/ebpf/aggregates.h"
#include "backends/ebpf/attach.h"
#include "backends/ebpf/call_limits.h"
#include "backends/ebpf/cond_maps.h"
#include "backends/ebpf/event_decoder.h"
#include "backends/ebpf/gccgo_goids.h"
#include "backends/ebpf/held_detach.h"
#include "backends/ebpf/insn_filter.h"
#include "backends/ebpf/map_writer.h"
#include "backends/ebpf/overhead.h"
#include "backends/ebpf/probe_config.h"
#include "backends/ebpf/prog_stats.h"
#include "backends/ebpf/target.h"
#include "backends/ebpf/value_chain.h"
#include "backends/ebpf/why_sums.h"
#include "core/binary/pclntab.h"
#include "core/events/goroutine_events.h"
#include "core/events/latency.h"
#include "core/events/live_metrics.h"
#include "core/events/overhead_budget.h"
#include "core/events/typed_events.h"
#include "core/model/go_quote.h"
#include "core/model/wait_reasons.h"
#include "core/plan/gccgo_binary.h"
#include "core/plan/mapped_names.h"
#include "core/plan/planned_image.h"
#include "core/plan/probe_detour.h"
#include "core/sys/fd.h"
#include "core/sys/image_lock.h"
#include "core/sys/proc_status.h"
#include "core/sys/test_delay.h"
#include "core/sys/timing.h"
#include "core/sys/uprobe_holders.h"
#include "core/sys/urgent_thread.h"
#include "core/why/why_sink.h"
#include "core/why/why_threads.h"
#include "gotap.skel.h"
#include "gotap_limits.h"

namespace gotap::ebpf {

namespace {

using Clock = std::chrono::steady_clock;

// libbpf's warnings, kept for the error message instead of going to stderr.
std::string& libbpf_log() {
  static std::string log;
  return log;
}

int on_libbpf_print(enum libbpf_print_level level, const char* fmt, va_list ap) {
  if (level == LIBBPF_DEBUG) return 0;
  char* buf = nullptr;
  if (vasprintf(&buf, fmt, ap) < 0) return 0;
  std::string& log = libbpf_log();
  if (log.size() < (1u << 20)) log += buf;
  free(buf);
  return 0;
}

// latency --why: each call's split is added up in the kernel (bpf/why_agg.h); trace --why
// sends the goroutine probes' changes to user space (core/why/why_sink.h).
bool why_in_kernel(const ProbePlan& plan, Mode mode) {
  return plan.goroutines.walk && mode == Mode::Latency && !plan.goroutines.all_changes;
}

struct SkelDeleter {
  void operator()(gotap_bpf* s) const { gotap_bpf__destroy(s); }
};
using Skel = std::unique_ptr<gotap_bpf, SkelDeleter>;

std::string last_libbpf_line() {
  std::string log = libbpf_log();
  while (!log.empty() && log.back() == '\n') log.pop_back();
  size_t nl = log.rfind('\n');
  return nl == std::string::npos ? log : log.substr(nl + 1);
}

// The sites' records into the `probes` map (map_writer.h).
Result<void> write_probes(int fd, const ProbeConfig& cfg) {
  MapWriter<gotap_probe> w(fd);
  for (uint32_t i = 0; i < cfg.sites.size(); ++i) GOTAP_TRY(w.put(i, cfg.record(i)));
  return w.flush();
}

Result<Skel> open_and_load(const ProbePlan& plan, const ProbeConfig& cfg, Mode mode, int tgid,
                           bool multi, bool live, uint32_t rate, int stack, const EbpfOptions& eo,
                           const cond::Condition* cond, bool measure_cost,
                           const std::optional<GccgoGAt>& gccgo) {
  libbpf_log().clear();
  Skel skel(gotap_bpf__open());
  if (!skel) return errno_error(ErrorKind::Runtime, "cannot open the BPF object");
  auto* ro = skel->rodata;
  ro->target_tgid = static_cast<uint32_t>(tgid);
  ro->mode = mode == Mode::Count     ? GOTAP_MODE_COUNT
             : mode == Mode::Latency ? GOTAP_MODE_LATENCY
                                     : GOTAP_MODE_TRACE;
  ro->g_goid_off = plan.offsets.g_goid;
  ro->g_stack_hi_off = plan.offsets.g_stack_hi;
  ro->tls_g_off = plan.tls_g_offset;
  ro->no_g = plan.reads_g ? 0 : 1;
  if (gccgo) {
    ro->gccgo_g = gccgo->self  ? GOTAP_GCCGO_G_DTV_SELF
                  : gccgo->dtv ? GOTAP_GCCGO_G_DTV
                               : GOTAP_GCCGO_G_EXEC;
    ro->tls_g_off = gccgo->fs_offset;
    ro->gccgo_modid = gccgo->modid;
    ro->gccgo_dtpoff = gccgo->dtpoff;
    ro->g_goid_off = gccgo->g_goid;
  }
  ro->wake_bytes = eo.ringbuf_bytes / 4;
  ro->live_metrics = live ? 1 : 0;
  // count --all: calls by process too, as a whole-system count is read per process.
  const bool per_process = mode == Mode::Count && tgid == 0;
  ro->per_process = per_process ? 1 : 0;
  if (!per_process) bpf_map__set_max_entries(skel->maps.proc_counts, 1);
  ro->bench_no_submit = eo.cut == EventCut::NoSubmit ? 1 : 0;
  ro->has_cond = cond ? 1 : 0;
  if (plan.goroutines.walk) {
    const RuntimeOffsets& o = plan.offsets;
    ro->why_walk = 1;
    ro->g_m_off = o.g_m;
    ro->m_curg_off = o.m_curg;
    ro->g_sched_pc_off = o.g_sched + o.gobuf_pc;
    ro->g_sched_bp_off = o.g_sched + o.gobuf_bp;
    ro->gstatus_ret_off = plan.goroutines.status_sp_delta;
  }
  // --why's kernel side (bpf/why_kernel.h), in trace mode; latency --why adds each call's
  // split up in the kernel (bpf/why_agg.h), from the same probes and tracepoints.
  const bool why_agg = why_in_kernel(plan, mode);
  const bool why_kernel = plan.goroutines.walk && (mode == Mode::Trace || why_agg);
  ro->why_kernel = why_kernel ? 1 : 0;
  // The trampoline backend's goroutine probes: its calls are not seen here (why_every).
  ro->why_every = why_kernel && eo.why_every_goroutine ? 1 : 0;
  ro->why_only = why_kernel && !ro->why_every && (why_agg || !plan.goroutines.all_changes) ? 1 : 0;
  ro->why_agg = why_agg ? 1 : 0;
  ro->g_waitreason_off = plan.offsets.g_waitreason;
  ro->why_reason_park_only = wait_reason_only_from_park(plan.go) ? 1 : 0;
  for (bpf_map* m : {skel->maps.why_gs, skel->maps.why_frames, skel->maps.why_parts,
                     skel->maps.why_waits, skel->maps.why_sys, skel->maps.why_ranges})
    if (!why_agg) bpf_map__set_max_entries(m, 1);
  for (bpf_program* p : {skel->progs.gotap_why_switch, skel->progs.gotap_why_sys_enter,
                         skel->progs.gotap_why_sys_exit})
    bpf_program__set_autoload(p, why_kernel);

  const uint32_t nsites = std::max<uint32_t>(1, static_cast<uint32_t>(cfg.sites.size()));
  const uint32_t nfuncs = std::max<uint32_t>(1, static_cast<uint32_t>(cfg.funcs.size()));
  // Only trace's events read a site's record; the other modes take all they need from the
  // cookie (gotap_cookie).
  bpf_map__set_max_entries(skel->maps.probes, mode == Mode::Trace ? nsites : 1);
  bpf_map__set_max_entries(skel->maps.counts, nfuncs);
  bpf_map__set_max_entries(skel->maps.why_threads, why_kernel ? why::why_threads_max() : 1);
  // Per-CPU arrays cost an allocation per entry and CPU as they are made (a whole binary's
  // 46,129 functions: tens of ms each): only the maps the mode writes are sized.
  const bool timed = mode == Mode::Latency || live;
  bpf_map__set_max_entries(skel->maps.lat_stats, timed ? nfuncs : 1);
  bpf_map__set_max_entries(skel->maps.lat_hist, timed ? nfuncs * GOTAP_NBUCKETS : 1);
  // Without --if no hit reads `conds` (has_cond): 904 bytes a function would be 40 MB of
  // kernel memory for a whole binary.
  bpf_map__set_max_entries(skel->maps.conds, cond ? nfuncs : 1);
  // Count keeps calls in flight only at sites that track them (GOTAP_PROBE_TRACK); without
  // any, the 65,536 preallocated entries cost 14 ms to make and are never used.
  if (mode == Mode::Count &&
      std::none_of(cfg.sites.begin(), cfg.sites.end(),
                   [](const SiteConfig& s) { return s.flags & GOTAP_PROBE_TRACK; }))
    bpf_map__set_max_entries(skel->maps.inflight, 1);
  bpf_map__set_max_entries(skel->maps.held, held_capacity(cond, mode));
  bpf_map__set_max_entries(skel->maps.events,
                           mode == Mode::Trace ? static_cast<uint32_t>(eo.ringbuf_bytes) : 4096);
  size_limit_maps(skel.get(), cfg, mode == Mode::Trace ? rate : 0,
                  mode == Mode::Trace ? static_cast<uint32_t>(stack) : 0);
  EbpfOverhead::configure(skel.get(), cfg, measure_cost);

  bpf_program* used = eo.empty_program ? skel->progs.gotap_empty : skel->progs.gotap_probe;
  bpf_program* unused = eo.empty_program ? skel->progs.gotap_probe : skel->progs.gotap_empty;
  bpf_program__set_autoload(unused, false);
  // The exit status of a process gotap did not start (a launched child's is waitpid's).
  bpf_program__set_autoload(skel->progs.gotap_exit, tgid > 0);
  bpf_program__set_autoload(skel->progs.gotap_exec, tgid > 0);
  if (multi)
    bpf_program__set_expected_attach_type(used, static_cast<bpf_attach_type>(kAttachUprobeMulti));
  if (int err = gotap_bpf__load(skel.get())) {
    if (getenv("GOTAP_BPF_DEBUG")) std::cerr << libbpf_log();
    Error e = runtime_error("cannot load the BPF program: {}", last_libbpf_line());
    e.errnum = -err;
    return e;
  }
  if (mode == Mode::Trace) GOTAP_TRY(write_probes(bpf_map__fd(skel->maps.probes), cfg));
  if (mode == Mode::Trace)
    GOTAP_TRY(write_chain_types(bpf_map__fd(skel->maps.chain_types), cfg, plan.binary_view));
  if (auto r = write_site_extra(skel.get(), cfg, gccgo && gccgo->self); !r) return r.error();
  if (cond) GOTAP_TRY(load_conditions(skel->maps.conds, *cond, plan, tgid));
  return skel;
}

struct Session {
  const BinaryView& bin;
  const ProbePlan& plan;
  const TraceOptions& opts;
  EventSink& sink;
  const ProbeConfig& cfg;
  std::unique_ptr<EventDecoder> decoder;
  std::unique_ptr<GoroutineEvents> goroutines;
  uint64_t events = 0;
  uint64_t samples = 0;  // ring buffer records handled, for the flush per batch
  EventCut cut = EventCut::None;
  // An exception out of decoding or the output: the trace ends, probes removed, exit 1.
  std::optional<std::string> failed{};
  // Read by --prometheus scrapes on the exporter's thread too.
  std::atomic<uint64_t> decode_failures{0};
  // The main loop's consumption stops after kSamplesPerTurn records (yielded), so that a
  // producer as fast as the reader (goroutine probes under --why) cannot keep the loop from
  // its other work: --max-overhead's samples, the target's exit, the duration.
  static constexpr uint64_t kSamplesPerTurn = 16384;
  bool bounded = false;
  bool yielded = false;
  uint64_t turn_samples = 0;
};

// Ends the live metrics before the maps they read go away, on every way out.
struct MetricsEnd {
  LiveMetrics* m = nullptr;
  void now() {
    if (m) m->end();
    m = nullptr;
  }
  ~MetricsEnd() { now(); }
};

// A goroutine probe's hit: words and goid copies as add_goroutine_sites laid them out.
bool on_goroutine_sample(Session& s, const void* data, size_t size) {
  gotap_event ev{};
  const size_t header = offsetof(gotap_event, data);
  if (size < header || size > sizeof(ev) || !s.goroutines) return false;
  std::memcpy(&ev, data, size);
  if (ev.nwords < 1) return false;
  // Cap i's bytes follow those of the caps before it; cap[i] is its first (up to) 8 bytes as
  // a little-endian integer. The goid caps must have been read; the others may fail alone.
  uint64_t cap[GOTAP_MAX_CAPS] = {};
  const uint8_t* bytes[GOTAP_MAX_CAPS] = {};
  size_t len[GOTAP_MAX_CAPS] = {};
  bool ok[GOTAP_MAX_CAPS] = {};
  size_t off = 0;
  for (unsigned i = 0; i < ev.ncaps && i < GOTAP_MAX_CAPS; ++i) {
    const size_t n = ev.cap_len[i];
    if (!(ev.cap_ok & (1u << i)) || n == 0) continue;
    if (off + n > ev.data_len || header + off + n > size) return false;
    std::memcpy(&cap[i], ev.data + off, std::min<size_t>(n, 8));
    bytes[i] = ev.data + off;
    len[i] = n;
    ok[i] = true;
    off += n;
  }
  auto good = [&](int i) { return i >= 0 && i < GOTAP_MAX_CAPS && ok[i]; };
  if (ev.func_id == GOTAP_FUNC_GSTATUS && ok[0] && ev.nwords >= 3) {
    const int rc = s.cfg.gstatus_reason_cap, oc = s.cfg.gstatus_origin_cap;
    std::optional<GoroutineOrigin> origin;
    if (good(oc)) origin = parse_origin(s.plan.offsets, bytes[oc], len[oc]);
    // --why: the stack the kernel walked (bpf/why_walk.h), after the copied bytes.
    std::optional<StatusStacks> stacks;
    if (s.plan.goroutines.walk && (ev.nstack || (ev.flags & GOTAP_EVF_WAKER))) {
      stacks.emplace();
      if (ev.flags & GOTAP_EVF_WAKER) stacks->waker_goid = ev.goid;
      for (size_t i = 0; i < ev.nstack; ++i) {
        const size_t at = size_t{ev.data_len} + i * 8;
        if (header + at + 8 > size) break;
        uint64_t pc = 0;
        std::memcpy(&pc, ev.data + at, 8);
        stacks->pcs.push_back(pc);
      }
    }
    uint32_t from = uint32_t(ev.words[1]), to = uint32_t(ev.words[2]);
    if (s.plan.goroutines.sysv) {
      from = libgo_status(from);
      to = libgo_status(to);
    }
    s.goroutines->on_status(ev.ts_ns, int(ev.tid), cap[0], from, to,
                            good(rc) ? int(cap[rc] & 0xff) : -1, origin ? &*origin : nullptr,
                            ev.nwords >= 4 ? ev.words[3] : 0, stacks ? &*stacks : nullptr);
  } else if (ev.func_id == GOTAP_FUNC_GCREATE && s.plan.goroutines.sysv && ev.nwords >= 4) {
    // libgo's __go_go: the start function's code, the running goroutine, the return address.
    s.goroutines->on_create(ev.ts_ns, int(ev.tid), ev.goid, ev.words[0], ev.words[3]);
  } else if (ev.func_id == GOTAP_FUNC_GCREATE && ok[0] && ev.nwords >= 3) {
    // Without a known newproc1 signature there is no parent to read (probe_config.cpp).
    const bool known = s.plan.goroutines.create_gp_arg != GoroutineProbes::kNoArg;
    if (known && !ok[1]) return false;
    s.goroutines->on_create(ev.ts_ns, int(ev.tid), known ? cap[1] : 0, cap[0],
                            known ? ev.words[2] : 0);
  } else if ((ev.func_id == GOTAP_FUNC_GSYSENTER || ev.func_id == GOTAP_FUNC_GSYSEXIT) && ok[0]) {
    const bool enter = ev.func_id == GOTAP_FUNC_GSYSENTER;
    s.goroutines->on_status(ev.ts_ns, int(ev.tid), cap[0], enter ? kGRunning : kGSyscall,
                            enter ? kGSyscall : kGRunning);
  } else if (ev.func_id == GOTAP_FUNC_GCREATED && ok[0]) {
    s.goroutines->on_created(ev.ts_ns, int(ev.tid), cap[0]);
  } else {
    return false;
  }
  return true;
}

int handle_sample(Session* s, void* data, size_t size) {
  if (s->cut == EventCut::NoDecode) return 0;
  if (size >= offsetof(gotap_event, data)) {
    const auto* ev = static_cast<const gotap_event*>(data);
    uint32_t func_id = ev->func_id;
    // --why: a kernel interval of a thread running a goroutine inside a traced call.
    if (func_id == GOTAP_FUNC_KPREEMPT || func_id == GOTAP_FUNC_KSYSCALL) {
      s->sink.emit(why::kernel_event(func_id == GOTAP_FUNC_KSYSCALL, ev->words[0], ev->ts_ns,
                                     int(ev->tid), int64_t(ev->goid), ev->words[1]));
      return 0;
    }
    if (func_id == GOTAP_FUNC_GSTATUS || func_id == GOTAP_FUNC_GCREATE ||
        func_id == GOTAP_FUNC_GCREATED || func_id == GOTAP_FUNC_GSYSENTER ||
        func_id == GOTAP_FUNC_GSYSEXIT) {
      if (!on_goroutine_sample(*s, data, size)) ++s->decode_failures;
      return 0;
    }
  }
  const auto kind = s->decoder->decode_call(data, size);
  if (kind == EventDecoder::Kind::None) {
    ++s->decode_failures;
    return 0;
  }
  if (s->cut == EventCut::NoPrint) return 0;
  if (kind == EventDecoder::Kind::Entry)
    s->sink.emit_entry(s->decoder->entry());
  else
    s->sink.emit_return(s->decoder->ret());
  ++s->events;
  return 0;
}

// libbpf's callback, called from C: nothing may unwind through it. A failure is kept and
// stops the consumption (a negative return); run_session then detaches and reports it.
int on_sample(void* ctx, void* data, size_t size) {
  auto* s = static_cast<Session*>(ctx);
  if (s->failed) return -1;
  ++s->samples;
  try {
    const int r = handle_sample(s, data, size);
    // A negative return ends libbpf's consumption after this record, which it has consumed.
    if (r == 0 && s->bounded && ++s->turn_samples >= Session::kSamplesPerTurn) {
      s->turn_samples = 0;
      s->yielded = true;
      return -EAGAIN;
    }
    return r;
  } catch (const std::exception& e) {
    s->failed = e.what();
  } catch (...) {
    s->failed = "unknown exception";
  }
  return -1;
}

// Whether a ptrace tracer (a gotap, a debugger) is attached to pid now.
bool ptrace_attached(int pid) {
  const auto tracer = sys::status_value(pid, 0, "TracerPid");
  return tracer && std::strtol(tracer->c_str(), nullptr, 10) != 0;
}

// The sites that hold an int3 in pid's memory that neither the file has nor a uprobe put
// there, while a ptrace tracer is attached: a uprobe over it would take that tracer's hits,
// and its removal would put the file's byte back under the tracer. With none attached, such
// an int3 is a killed gotap's: a uprobe on top works (the kernel takes the instruction from
// the file), and removing the uprobe puts the file's byte back.
struct HeldSites {
  std::map<uint32_t, uint64_t> entries;  // func_id -> its entry probe: the function is left out
  std::map<uint64_t, uint32_t> others;   // RETs and inlined copies' sites -> func_id: each left out
  size_t size() const { return entries.size() + others.size(); }
};
HeldSites held_sites(const BinaryView& bin, const ProbeConfig& cfg, int pid,
                     const PlannedImage& planned) {
  HeldSites out;
  if (!ptrace_attached(pid)) return out;
  const std::string& path = planned.attach_path;
  // Where the planned file is mapped, the executable or a library's copy (-p PID --binary).
  const auto mapped = proven_bias(*bin.elf, planned, pid);
  if (!mapped) return out;
  const uint64_t bias = *mapped;
  sys::Fd mem(open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (mem.get() < 0) return out;
  std::optional<std::map<uint64_t, std::string>> uprobes;
  for (const auto& site : cfg.sites) {
    const uint32_t id = site.func_id;
    if (id >= cfg.funcs.size()) continue;
    uint8_t now = 0;
    if (pread(mem.get(), &now, 1, static_cast<off_t>(site.addr + bias)) != 1 || now != 0xCC)
      continue;
    auto file = bin.elf->read(site.addr, 1);
    if (file.empty() || file[0] == 0xCC) continue;
    if (!uprobes) uprobes = sys::uprobe_holders(path, pid);
    auto off = bin.elf->vaddr_to_offset(site.addr);
    if (off && uprobes->count(*off)) continue;
    if (site.addr == cfg.funcs[id].plan->entry_probe && !(site.flags & GOTAP_PROBE_INLINE))
      out.entries.emplace(id, site.addr);
    else
      out.others.emplace(site.addr, id);
  }
  return out;
}

// Functions (func_id -> site) whose code up to their entry probe is not the file's (a
// trampoline gotap's jump on the stack check, core/plan/probe_detour.h).
std::map<uint32_t, uint64_t> detoured_entries(const BinaryView& bin, const ProbeConfig& cfg,
                                              int pid, const PlannedImage& planned) {
  std::map<uint32_t, uint64_t> out;
  const auto mapped = proven_bias(*bin.elf, planned, pid);
  if (!mapped) return out;
  sys::Fd mem(open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC));
  if (mem.get() < 0) return out;
  for (const auto& site : cfg.sites) {
    const uint32_t id = site.func_id;
    if (id >= cfg.funcs.size() || site.addr != cfg.funcs[id].plan->entry_probe) continue;
    const FuncPlan& f = *cfg.funcs[id].plan;
    const size_t n = detour_span(f);
    uint8_t live[64];
    if (!n || n > sizeof live ||
        pread(mem.get(), live, n, static_cast<off_t>(f.entry + *mapped)) != ssize_t(n))
      continue;
    if (entry_probe_detoured(f, bin.elf->read(f.entry, n), Bytes(live, n)))
      out.emplace(id, site.addr);
  }
  return out;
}

// --max-overhead: the calls of func whose entry was reported and whose return will not be,
// now that its uprobes are gone. They are left out of `unfinished` (the detached event
// counts them), since the program did not leave them unfinished.
uint64_t open_calls(gotap_bpf* skel, const ProbeConfig& cfg, uint32_t func) {
  uint64_t n = 0;
  if (!cfg.funcs[func].traced_returns) return 0;
  for_each_entry<gotap_call_key, gotap_inflight>(
      bpf_map__fd(skel->maps.inflight), [&](const gotap_call_key& k, const gotap_inflight& in) {
        if (k.func_id == func && in.ts != 0 && !(in.flags & GOTAP_INFLIGHT_DROPPED)) ++n;
      });
  return n;
}

std::string target_text(const TraceOptions& opts, int pid, const std::string& path) {
  if (opts.target.all) return "every process running " + path;
  return "pid " + std::to_string(pid);
}

// Probe sites as file offsets; the kernel resolves them per mapping (PIE or not). Known
// refusals cost a failed attach each: they are left out up front, in `refused`. Reading each
// site's instruction faults the executable's code back in, which planning gave back (18 MB of
// caddy, its cold peak): the sites are checked in address order and each batch's range is
// given back once checked.
struct SplitSites {
  std::vector<Site> sites, refused;
  std::vector<Site> lib_sites;  // in GoroutineProbes::image (libgo.so)
};
Result<SplitSites> split_sites(const BinaryView& bin, const ProbeConfig& cfg, const ElfFile* lib) {
  SplitSites out;
  out.sites.reserve(cfg.sites.size());
  std::vector<bool> can(cfg.sites.size());
  std::vector<uint32_t> by_addr(cfg.sites.size());
  for (uint32_t i = 0; i < by_addr.size(); ++i) by_addr[i] = i;
  std::sort(by_addr.begin(), by_addr.end(),
            [&](uint32_t a, uint32_t b) { return cfg.sites[a].addr < cfg.sites[b].addr; });
  constexpr size_t kBatch = 4096;
  for (size_t lo = 0; lo < by_addr.size(); lo += kBatch) {
    const size_t hi = std::min(by_addr.size(), lo + kBatch);
    for (size_t k = lo; k < hi; ++k)
      if (!cfg.sites[by_addr[k]].lib)
        can[by_addr[k]] = uprobe_can_probe(bin.elf->read(cfg.sites[by_addr[k]].addr, 16));
    if (by_addr.size() >= kBatch) {
      const uint64_t from = cfg.sites[by_addr[lo]].addr;
      bin.elf->release(from, cfg.sites[by_addr[hi - 1]].addr + 16 - from);
    }
  }
  for (uint32_t i = 0; i < cfg.sites.size(); ++i) {
    if (cfg.sites[i].lib) {
      // A few goroutine probes, looked at one by one (GoroutineProbes::image gave `lib`).
      const SiteConfig& s = cfg.sites[i];
      auto off = lib->vaddr_to_offset(s.addr);
      if (!off) return make_error("probe address {} is not in {}", hex(s.addr), lib->path());
      const bool ok = uprobe_can_probe(lib->read(s.addr, 16));
      (ok ? out.lib_sites : out.refused).push_back({*off, gotap_cookie(i, s.flags, s.func_id)});
      continue;
    }
    auto off = bin.elf->vaddr_to_offset(cfg.sites[i].addr);
    if (!off) return make_error("probe address {} is not in the file", hex(cfg.sites[i].addr));
    const SiteConfig& s = cfg.sites[i];
    if (s.folded) continue;  // the next site's uprobe runs it
    (can[i] ? out.sites : out.refused).push_back({*off, gotap_cookie(i, s.flags, s.func_id)});
  }
  return out;
}

}  // namespace

Result<void> run_session(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink,
                         const EbpfOptions& eo) {
  const BinaryView& bin = plan.binary_view;
  if (!bin.elf) return make_error("the plan names no binary (GoBinary::plan)");
  static bool print_set = false;
  if (!print_set) {
    libbpf_set_print(on_libbpf_print);
    print_set = true;
  }
  if (opts.mode != Mode::Trace && opts.mode != Mode::Count && opts.mode != Mode::Latency &&
      opts.mode != Mode::Goroutines)
    return make_error("the ebpf backend supports trace, count, latency and goroutines");
  // Goroutine events are trace events of the runtime's probes.
  const Mode mode = opts.mode == Mode::Goroutines ? Mode::Trace : opts.mode;
  const bool goroutines = plan.goroutines.status != 0;
  if (goroutines && mode != Mode::Trace && !why_in_kernel(plan, mode))
    return make_error("goroutine events need the trace mode of the ebpf backend");

  ProbeConfig cfg =
      build_probe_config(plan, mode, opts.max_str, bin.types, opts.condition, opts.count_failed);
  if (cfg.sites.empty()) return make_error("nothing to probe: no function has a probe site");
  if (cfg.sites.size() > GOTAP_COOKIE_MAX_SITES)
    return make_error("{} probe sites are more than the eBPF backend can address ({})",
                      cfg.sites.size(), GOTAP_COOKIE_MAX_SITES);

  // The probes go into the planned file and no other, whatever its path names by now.
  auto planned = PlannedImage::of(*bin.elf);
  if (!planned) return planned.error();
  const std::string& path = planned->attach_path;

  // The target: launched children wait, stopped, until the probes are live.
  TargetProcess target;
  int filter_pid = 0;
  if (!opts.target.argv.empty()) {
    // Test only: the file may change on disk before it starts (test_runtime_exec_planned).
    sys::test_delay("GOTAP_TEST_ATTACH_DELAY_MS", "attaching");
    auto t = TargetProcess::launch(opts.target.argv);
    if (!t) return t.error();
    target = std::move(*t);
    filter_pid = target.pid();
  } else if (opts.target.pid > 0) {
    auto t = TargetProcess::attach(opts.target.pid);
    if (!t) return t.error();
    target = std::move(*t);
    filter_pid = target.pid();
  } else if (!opts.target.all) {
    return make_error("no target: give a pid, a command or --all");
  }

  // A gccgo program's goroutine ids, once ld.so has placed libgo's TLS (a launched child runs
  // that far first).
  const std::optional<GccgoGAt> gccgo =
      gccgo_goids(plan, target, eo.quiet || (mode == Mode::Count && !opts.condition));
  if (!plan.reads_g) cfg.no_goid = !gccgo;
  if (!plan.reads_g && target.launched() && target.exited())
    return runtime_error("{} exited before it could be traced", bin.path());

  // uprobe_multi first: one link for every site. Kernels before 6.6 refuse it; then one
  // perf-event uprobe per site. The sites are read and checked on the second CPU while the
  // BPF object loads here (neither needs the other; the future joins on every way out).
  const auto t_attach = Clock::now();
  const ElfFile* lib = plan.goroutines.image;
  auto splitting = std::async(std::launch::async, [&] { return split_sites(bin, cfg, lib); });
  Skel skel;
  Attachment attachment;
  std::string multi_error;
  // Count keeps its own in-kernel counts; trace and latency add them for --prometheus.
  const bool live = opts.metrics && mode != Mode::Count;
  // --max-overhead: the kernel measures each site's cost, and each function has uprobes of
  // its own, so that one can go while the others stay (backends/ebpf/overhead.h).
  const bool measure_cost = opts.max_overhead_pct > 0 && filter_pid > 0;
  std::optional<Result<Skel>> multi_skel;
  if (!eo.force_per_site)
    multi_skel = open_and_load(plan, cfg, mode, filter_pid, true, live, opts.rate_per_s,
                               opts.stack_depth, eo, opts.condition, measure_cost, gccgo);
  auto split = splitting.get();
  if (!split) {
    target.terminate();
    return split.error();
  }
  std::vector<Site> sites = std::move(split->sites);
  std::vector<Site> refused = std::move(split->refused);
  const std::vector<Site> lib_sites = std::move(split->lib_sites);
  // Test only: the process may exec between the plan and the attach.
  if (opts.target.argv.empty()) sys::test_delay("GOTAP_TEST_ATTACH_DELAY_MS", "attaching");

  // From the look at the sites to the last uprobe registered, no other gotap looks at or
  // writes a site of this file: a ptrace gotap that looked at once would find no int3 here,
  // and its int3 under this trace's uprobes would blind both (core/sys/image_lock.h).
  auto lock = eo.image_locked ? Result<sys::ImageLock>(sys::ImageLock())
                              : sys::ImageLock::take(path, bin.path(), sys::ImageLock::kPlaceWaitMs,
                                                     &stop_requested());
  if (!lock) {
    target.terminate();
    return lock.error();
  }

  // Sites another tracer holds with an int3 of its own (a ptrace gotap, a debugger): a uprobe
  // there would take its hits, and go with its byte when that tracer puts the file's back.
  // A function whose entry is held is not traced at all, as under ptrace (docs/cli.md, "Sites
  // another tracer holds"); another held site (a RET, an inlined copy's) is left out alone.
  // Other uprobes are no obstacle: the kernel shares a site between them.
  if (opts.target.pid > 0) {
    const HeldSites held = held_sites(bin, cfg, filter_pid, *planned);
    if (held.size()) {
      std::erase_if(sites, [&](const Site& s) {
        const SiteConfig& c = cfg.sites[gotap_cookie_site(s.cookie)];
        return held.entries.count(c.func_id) || held.others.count(c.addr);
      });
      const uint32_t named =
          held.entries.empty() ? held.others.begin()->second : held.entries.begin()->first;
      const std::string first = cfg.funcs[named].plan->name;
      if (sites.empty()) {
        target.terminate();
        return runtime_error(
            "no probe could be placed: every function's entry or site already holds an int3 "
            "of another tracer (ptrace or a debugger): {} site{}, e.g. in {}",
            held.size(), held.size() == 1 ? "" : "s", first);
      }
      if (!eo.quiet && !held.entries.empty())
        std::cerr << "gotap: warning: " << held.entries.size() << " function(s) not traced: "
                  << "their entry already holds an int3 of another tracer (ptrace or a "
                  << "debugger), e.g. "
                  << printable(cfg.funcs[held.entries.begin()->first].plan->name) << "\n";
      if (!eo.quiet && !held.others.empty())
        std::cerr << "gotap: warning: " << held.others.size() << " site(s) left out (RETs or "
                  << "inlined copies): each already holds an int3 of another tracer (ptrace or a "
                  << "debugger), e.g. in " << printable(first) << "\n";
    }
  }

  // Functions whose entry probe another tracer's jump holds: left to it, as a held entry is.
  if (opts.target.pid > 0) {
    auto detoured = detoured_entries(bin, cfg, filter_pid, *planned);
    if (!detoured.empty()) {
      std::erase_if(sites, [&](const Site& s) {
        return detoured.count(cfg.sites[gotap_cookie_site(s.cookie)].func_id);
      });
      const std::string first = cfg.funcs[detoured.begin()->first].plan->name;
      const std::string why = fmt::format(
          "another tracer's jump (a trampoline gotap's) holds the entry probe of {} "
          "function{}, e.g. {}",
          detoured.size(), detoured.size() == 1 ? "" : "s", printable(first));
      if (sites.empty()) {
        target.terminate();
        return runtime_error("no probe could be placed: {}", why);
      }
      if (!eo.quiet) std::cerr << "gotap: warning: not traced: " << why << "\n";
    }
  }

  // Test only: the window between the look and the uprobes, which the lock closes
  // (test_runtime_two_tracers.cpp).
  sys::test_delay("GOTAP_TEST_PLACE_DELAY_MS", "placing the probes");

  std::vector<uint32_t> group_of;
  if (measure_cost)
    for (const Site& s : sites) group_of.push_back(cfg.sites[gotap_cookie_site(s.cookie)].func_id);
  if (multi_skel) {
    auto& s = *multi_skel;
    if (s) {
      bpf_program* prog = eo.empty_program ? (*s)->progs.gotap_empty : (*s)->progs.gotap_probe;
      auto a = Attachment::place(true, prog, path, sites, group_of, filter_pid);
      if (a) {
        skel = std::move(*s);
        attachment = std::move(*a);
      } else {
        multi_error = a.error().what();
      }
    } else {
      multi_error = s.error().what();
    }
  }
  if (!skel) {
    auto s = open_and_load(plan, cfg, mode, filter_pid, false, live, opts.rate_per_s,
                           opts.stack_depth, eo, opts.condition, measure_cost, gccgo);
    if (!s) {
      target.terminate();
      return s.error();
    }
    bpf_program* prog = eo.empty_program ? (*s)->progs.gotap_empty : (*s)->progs.gotap_probe;
    auto a = Attachment::place(false, prog, path, sites, group_of, filter_pid);
    if (!a) {
      target.terminate();
      Error e = a.error();
      if (!multi_error.empty() && multi_error.rfind(e.message, 0) != 0)
        e.message += " (uprobe_multi: " + multi_error + ")";
      return e;
    }
    skel = std::move(*s);
    attachment = std::move(*a);
  }
  // A function whose entry another tracer's uprobe holds (with a reference counter: held())
  // is not traced at all, as with an int3 there: its returns alone would be calls without a
  // start, and where entries are deduplicated an entry left open would swallow a later call.
  // Its other sites come out again: attached once more without them.
  std::vector<Site> held = attachment.held(), held_left;
  {
    std::set<uint32_t> drop;
    for (const Site& h : held)
      if (!(gotap_cookie_flags(h.cookie) & (GOTAP_PROBE_RET | GOTAP_PROBE_INLINE)))
        drop.insert(gotap_cookie_func(h.cookie));
    if (!drop.empty()) {
      std::vector<Site> kept;
      std::vector<uint32_t> kept_groups;
      for (size_t i = 0; i < sites.size(); ++i) {
        if (drop.count(gotap_cookie_func(sites[i].cookie))) {
          if (std::none_of(held.begin(), held.end(),
                           [&](const Site& h) { return h.cookie == sites[i].cookie; }))
            held_left.push_back(sites[i]);
          continue;
        }
        kept.push_back(sites[i]);
        if (!group_of.empty()) kept_groups.push_back(group_of[i]);
      }
      const bool multi = std::string_view(attachment.method()) == "uprobe_multi";
      attachment.detach();
      if (kept.empty()) {
        target.terminate();
        return runtime_error(
            "no probe could be placed: another tracer's uprobe with a reference counter holds "
            "the entry of every function (Debian's bcc 0.26 sets a stray one)");
      }
      bpf_program* prog = eo.empty_program ? skel->progs.gotap_empty : skel->progs.gotap_probe;
      auto a = Attachment::place(multi, prog, path, kept, kept_groups, filter_pid);
      if (!a) {
        target.terminate();
        return a.error();
      }
      attachment = std::move(*a);
      held.insert(held.end(), attachment.held().begin(), attachment.held().end());
    }
  }
  // libgo.so's goroutine probes, through gotap's own descriptor of the file planned, in the
  // traced process alone; proven below to be the copy it maps.
  Attachment lib_attachment;
  std::optional<PlannedImage> lib_planned;
  std::optional<uint64_t> lib_bias;  // once proven
  if (!lib_sites.empty()) {
    auto img = PlannedImage::of(*lib);
    bpf_program* prog = eo.empty_program ? skel->progs.gotap_empty : skel->progs.gotap_probe;
    auto a = !img ? Result<Attachment>(img.error())
             : std::string_view(attachment.method()) == "uprobe_multi"
                 ? Attachment::multi(prog, img->attach_path, lib_sites, filter_pid)
                 : Attachment::per_site(prog, img->attach_path, lib_sites, filter_pid);
    if (!a) {
      attachment.detach();
      target.terminate();
      return runtime_error("cannot probe {} for goroutine states: {}", printable(lib->path()),
                           a.error().what());
    }
    lib_attachment = std::move(*a);
    lib_planned = *img;
  }
  // Best effort: without it the summary has no exit status, as with --all.
  if (opts.target.pid > 0) skel->links.gotap_exit = bpf_program__attach(skel->progs.gotap_exit);
  // Before the process is proven to run the plan's file: an exec after that is seen.
  if (filter_pid > 0) {
    skel->links.gotap_exec = bpf_program__attach(skel->progs.gotap_exec);
    if (!skel->links.gotap_exec) {
      target.terminate();
      return errno_error(ErrorKind::Runtime, "cannot attach the exec tracepoint");
    }
  }
  // --why: the scheduler and system-call tracepoints. Without them the kernel's parts stay
  // null (the why sink hears of them from the "kwhy" start below).
  bool why_kernel = false;
  const bool why_agg = why_in_kernel(plan, mode);
  if (plan.goroutines.walk && (mode == Mode::Trace || why_agg)) {
    skel->links.gotap_why_switch = bpf_program__attach(skel->progs.gotap_why_switch);
    skel->links.gotap_why_sys_enter = bpf_program__attach(skel->progs.gotap_why_sys_enter);
    skel->links.gotap_why_sys_exit = bpf_program__attach(skel->progs.gotap_why_sys_exit);
    why_kernel = skel->links.gotap_why_switch && skel->links.gotap_why_sys_enter &&
                 skel->links.gotap_why_sys_exit;
    if (!why_kernel && !eo.quiet)
      std::cerr << "gotap: warning: cannot attach the scheduler and system-call tracepoints: "
                   "--why leaves preempted_ns and syscalls null\n";
  }
  // Whether the process runs the planned file, asked once its uprobes are registered: one
  // that exec'd before is refused; one that execs from now on keeps none of them
  // (planned_image.h). Dynamic types: the tracee's addresses, minus the PIE load bias, are
  // the file's.
  uint64_t bias = 0;
  if (filter_pid > 0) {
    auto proven = proven_bias(*bin.elf, *planned, filter_pid);
    if (!proven) {
      attachment.detach();
      const bool gone = target.exited();
      target.terminate();
      if (gone) return runtime_error("pid {} exited before its probes were in place", filter_pid);
      if (target.launched())
        return runtime_error(
            "the program started (pid {}) is not the file that was planned: it changed on disk "
            "in between; nothing was traced",
            filter_pid);
      if (opts.target.library)
        return runtime_error(
            "pid {} does not map {} (or maps another copy of it): nothing was traced and no "
            "probe is left",
            filter_pid, printable(bin.path()));
      return runtime_error(
          "pid {} changed its program (exec) after gotap read it: it no longer runs the file "
          "that was planned; nothing was traced and no probe is left",
          filter_pid);
    }
    bias = *proven;
    if (lib_planned) lib_bias = proven_bias(*lib, *lib_planned, filter_pid);
    if (lib_planned && !lib_bias) {
      lib_attachment.detach();
      attachment.detach();
      target.terminate();
      return runtime_error(
          "pid {} does not map the {} gotap read for its goroutine probes: nothing was traced "
          "and no probe is left",
          filter_pid, printable(lib->path()));
    }
  }
  lock->release();
  // The interface types' keys are link-time addresses (value_chain.h).
  skel->bss->chain_bias = bias;
  if (why_agg) {
    // Where a wait is told by (bpf/why_agg.h): the run-time text of the functions outside the
    // runtime, and park_m's.
    const auto ranges = why_keep_ranges(*bin.pclntab, bias);
    MapWriter<gotap_why_range> w(bpf_map__fd(skel->maps.why_ranges));
    uint32_t n = 0;
    for (; n < ranges.size() && n < GOTAP_WHY_RANGES; ++n)
      if (auto r = w.put(n, ranges[n]); !r) break;
    if (auto r = w.flush(); !r || n < ranges.size()) {
      attachment.detach();
      target.terminate();
      return runtime_error(
          "latency --why cannot name the frames of waits in the kernel ({} runs of functions "
          "outside the runtime, room for {}): trace --why splits each call in user space",
          ranges.size(), GOTAP_WHY_RANGES);
    }
    skel->bss->why_nranges = n;
    for (const PclnFunc* f : bin.pclntab->lookup("runtime.park_m")) {
      skel->bss->why_park_lo = f->entry + bias;
      skel->bss->why_park_hi = f->end + bias;
    }
  }
  const double attach_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t_attach).count();
  // libgo.so's goroutine probes' too: a goroutine probe another uprobe holds is a change
  // never seen.
  held.insert(held.end(), lib_attachment.held().begin(), lib_attachment.held().end());
  refused.insert(refused.end(), attachment.skipped().begin(), attachment.skipped().end());
  refused.insert(refused.end(), lib_attachment.skipped().begin(), lib_attachment.skipped().end());
  if (!refused.empty() && !eo.quiet) {
    const auto& first = cfg.sites[gotap_cookie_site(refused[0].cookie)];
    const uint32_t id = first.func_id;
    std::cerr << "gotap: warning: the kernel refuses " << refused.size()
              << " probe site(s) (instructions uprobes refuse or would run wrongly), e.g. "
              << hex(first.addr) << " in "
              << (id < cfg.funcs.size() ? printable(cfg.funcs[id].plan->name) : "a goroutine probe")
              << "\n";
  }
  if (!held.empty() && !eo.quiet) {
    const auto& first = cfg.sites[gotap_cookie_site(held[0].cookie)];
    const uint32_t id = first.func_id;
    const bool ret = gotap_cookie_flags(held[0].cookie) & GOTAP_PROBE_RET;
    std::cerr << "gotap: warning: " << held.size()
              << " probe site(s) hold another tracer's uprobe with a reference counter (a USDT "
                 "semaphore; Debian's bcc 0.26 sets a stray one), which the kernel lets no "
                 "other uprobe share: left out, e.g. "
              << (id >= cfg.funcs.size()
                      ? std::string("a goroutine probe (the changes it tells are not seen)")
                      : (ret ? "a return of " : "the entry of ") +
                            printable(cfg.funcs[id].plan->name) +
                            (ret ? " (its calls do not end)" : " (the function is not traced)"))
              << "\n";
  }
  // All left out, for skipped_sites.
  refused.insert(refused.end(), held.begin(), held.end());
  refused.insert(refused.end(), held_left.begin(), held_left.end());

  Session session{bin, plan, opts, sink, cfg, nullptr, nullptr};
  session.cut = eo.cut;
  // A pc in libgo.so (its goroutine probes' callers) is named from that file's symbols.
  const std::vector<GccgoFunc>* lib_funcs = plan.goroutines.image_funcs;
  // With a library as the target, pcs in the executable are named from that file.
  std::shared_ptr<MappedNames> mapped =
      opts.target.library ? std::make_shared<MappedNames>(filter_pid) : nullptr;
  auto func_name = [&bin, bias, lib_bias, lib_funcs, mapped](uint64_t pc) {
    std::string name = pc >= bias ? bin.func_name(pc - bias) : std::string();
    if (name.empty() && lib_bias && lib_funcs && pc >= *lib_bias)
      name = gccgo_func_name(*lib_funcs, pc - *lib_bias);
    if (name.empty() && mapped) name = mapped->name(pc);
    return name;
  };
  session.decoder = std::make_unique<EventDecoder>(cfg, bin.types, bin.elf, bin.rt, bias,
                                                   opts.max_str, func_name);
  if (opts.stack_depth > 0) session.decoder->set_stack(&bin, opts.stack_depth);
  if (goroutines) {
    session.goroutines = std::make_unique<GoroutineEvents>(
        sink, filter_pid, func_name, plan.wait_reasons, wait_reason_only_from_park(plan.go));
  }

  if (why_kernel) sink.emit(why::kernel_start_event());
  std::unique_ptr<ring_buffer, void (*)(ring_buffer*)> rb(nullptr, &ring_buffer__free);
  if (mode == Mode::Trace) {
    rb.reset(ring_buffer__new(bpf_map__fd(skel->maps.events), on_sample, &session, nullptr));
    if (!rb) {
      target.terminate();
      return errno_error(ErrorKind::Runtime, "cannot open the BPF ring buffer");
    }
  }

  // latency --why: how the kernel's sums are named (why_sums.h).
  const WhyNames why_names{func_name, plan.wait_reasons, why_kernel, why_kernel};
  // One more slot, after the functions': the goroutine probes' (kGoroutineProbes).
  OverheadBudget budget(measure_cost ? opts.max_overhead_pct : 0, cfg.funcs.size() + 1);
  std::optional<EbpfOverhead> overhead;
  if (measure_cost) overhead.emplace(cfg, bin);
  std::atomic<uint64_t> detached_total{0};  // read by --prometheus scrapes
  MetricsEnd metrics_end;
  if (opts.metrics) {
    const int counts_fd = bpf_map__fd(skel->maps.counts);
    const int stats_fd = bpf_map__fd(skel->maps.lat_stats);
    const int hist_fd = bpf_map__fd(skel->maps.lat_hist);
    const int counters_fd = bpf_map__fd(skel->maps.counters);
    opts.metrics->begin(
        filter_pid, [&, counts_fd, stats_fd, hist_fd, counters_fd](MetricsSnapshot& snap) {
          // Whole maps in batches: a scrape of a whole binary is 10,000s of functions.
          const uint32_t n = static_cast<uint32_t>(cfg.funcs.size());
          const std::vector<uint64_t> calls = read_percpu_u64_all(counts_fd, n);
          const auto failed = read_failed_all(skel.get(), cfg);
          const bool limited = opts.rate_per_s && mode == Mode::Trace;
          const std::vector<uint64_t> dropped =
              limited ? read_percpu_u64_all(bpf_map__fd(skel->maps.rate_dropped), n)
                      : std::vector<uint64_t>();
          auto timed = mode != Mode::Count ? read_latency_all(stats_fd, hist_fd, n)
                                           : std::vector<std::pair<uint32_t, LatencySummary>>();
          size_t next_timed = 0;
          snap.funcs.reserve(n);
          for (uint32_t f = 0; f < n; ++f) {
            FuncMetrics m;
            m.func = cfg.funcs[f].plan->name;
            m.calls = calls[f];
            m.failed = failed[f];
            if (limited) m.rate_limited = dropped[f];
            if (mode != Mode::Count) {
              m.timed = true;
              if (next_timed < timed.size() && timed[next_timed].first == f)
                m.latency = std::move(timed[next_timed++].second);
            }
            snap.funcs.push_back(std::move(m));
          }
          snap.lost = read_percpu_u64(counters_fd, GOTAP_CNT_LOST) + session.decode_failures.load();
          if (measure_cost) snap.detached_functions = detached_total.load();
          // latency --why: gotap_call_seconds_total from the kernel's sums, whole each time.
          if (why_agg) {
            WhySums sums;
            read_why_sums(bpf_map__fd(skel->maps.why_parts), bpf_map__fd(skel->maps.why_waits),
                          bpf_map__fd(skel->maps.why_sys), sums);
            snap.why_ns.clear();
            for (const auto& [f, buckets] : sums)
              if (f < n)
                add_why_ns(snap.why_ns, cfg.funcs[f].plan->name, why_of(buckets, why_names).first);
          }
        });
    metrics_end.m = opts.metrics;
  }

  // What arming used and freed (libbpf's copy of the kernel's BTF, the object's sections,
  // the batches of records) goes back to the system for the length of the trace.
  malloc_trim(0);
  sys::timing_mark("ebpf: armed");
  if (!eo.quiet && eo.banner) {
    std::cerr << tracing_banner(cfg.funcs.size(), cfg.probe_count(), "ebpf",
                                target_text(opts, filter_pid, bin.path()), goroutines)
              << std::endl;
  }
  if (eo.on_live) eo.on_live(cfg.probe_count(), filter_pid);
  if (auto r = target.release(); !r) {
    target.terminate();
    return r.error();
  }
  auto stopping = [&eo] { return stop_requested().load() || (eo.stop && eo.stop->load()); };

  // Until the target exits, the duration ends or a stop is requested.
  const auto t_start = Clock::now();
  bool target_exited = false, target_execd = false;
  uint64_t flushed = 0;
  while (!stopping()) {
    if (opts.duration_s > 0 &&
        std::chrono::duration<double>(Clock::now() - t_start).count() >= opts.duration_s)
      break;
    if (rb) {
      // Events arrive without wake-ups (see gotap.bpf.c), and ring_buffer__poll reads only
      // the rings epoll reported: consume whatever came in meanwhile, then hand the batch
      // to the reader. One flush per 20 ms batch, not per event, keeps a busy trace cheap
      // while each event reaches the output within ~20 ms (docs/cli.md).
      // After a turn cut short, records are waiting: no poll's wait.
      session.bounded = true;
      const uint64_t read_at = sys::monotonic_ns();
      if (!session.yielded) ring_buffer__poll(rb.get(), 20);
      session.yielded = false;
      ring_buffer__consume(rb.get());
      session.bounded = false;
      session.turn_samples = 0;
      if (session.failed) break;
      if (session.samples != flushed) {
        sink.flush();
        flushed = session.samples;
      }
      // A turn cut short left records of before read_at unread: no mark until they are read.
      if (eo.on_read && !session.yielded) eo.on_read(read_at);
    } else {
      poll(nullptr, 0, 50);
    }
    if (filter_pid > 0 && target.exited()) {
      target_exited = true;
      break;
    }
    if (filter_pid > 0 && skel->bss->target_exec_seen) {
      target_execd = true;
      break;
    }
    if (const uint64_t now = sys::monotonic_ns(); budget.due(now)) {
      auto cpu = process_cpu_ns(filter_pid);
      if (!cpu) continue;
      std::vector<uint64_t> cost, hits;
      overhead->costs(skel.get(), cost, hits);
      for (const OverheadTrip& t : budget.sample(now, *cpu, cost, hits)) {
        overhead->silence(skel.get(), static_cast<uint32_t>(t.func));
        if (t.func == cfg.funcs.size()) {
          // latency --why leaves out the calls that return from now on.
          if (why_agg) skel->bss->why_stopped = 1;
          // Each goroutine probe is a group of its own (its func_id).
          for (uint32_t id : {GOTAP_FUNC_GSTATUS, GOTAP_FUNC_GCREATE, GOTAP_FUNC_GCREATED,
                              GOTAP_FUNC_GSYSENTER, GOTAP_FUNC_GSYSEXIT})
            attachment.detach_group(id);
          if (rb) ring_buffer__consume(rb.get());
          ++detached_total;
          std::cerr << "gotap: " << detached_message(kGoroutineProbes, t, budget.percent())
                    << std::endl;
          sink.emit(detached_event(sys::monotonic_ns(), filter_pid, kGoroutineProbes, t,
                                   budget.percent(), 0));
          ++session.events;
          continue;
        }
        attachment.detach_group(static_cast<uint32_t>(t.func));
        // What its probes sent before goes out before the event that says they are gone.
        if (rb) ring_buffer__consume(rb.get());
        ++detached_total;
        const std::string& name = cfg.funcs[t.func].plan->name;
        std::cerr << "gotap: " << detached_message(name, t, budget.percent()) << std::endl;
        sink.emit(detached_event(sys::monotonic_ns(), filter_pid, name, t, budget.percent(),
                                 open_calls(skel.get(), cfg, static_cast<uint32_t>(t.func))));
        ++session.events;
      }
    }
  }

  // The end, at the highest priority: closing the link removes every uprobe on this thread,
  // one page write in the tracee each, under a lock of its address space that its threads,
  // trapping into the others meanwhile, contend for, and a TLB flush on every CPU they run
  // on. Behind a busy tracee and its load, a whole caddy's 116,521 took 1.2 to 6.7 s; with
  // its threads held (held_detach.h), 0.4 s (docs/benchmarks.md, "Ending a whole-binary
  // trace under load").
  const sys::UrgentThread urgent;
  std::optional<HeldDetach> held_detach;
  sys::timing_mark("ebpf: traced");
  const auto t_detach = Clock::now();
  bpf_program* prog = eo.empty_program ? skel->progs.gotap_empty : skel->progs.gotap_probe;
  const std::optional<ProgStats> stats = prog_stats(bpf_program__fd(prog));
  {
    // While the uprobes go, another gotap looking at the sites would find some of them still
    // held; a holder stuck that long does not keep them.
    auto relock = sys::ImageLock::take(path, bin.path(), sys::ImageLock::kRemoveWaitMs);
    if (!relock && !eo.quiet)
      std::cerr << "gotap: warning: removing the probes unlocked: " << relock.error().what()
                << "\n";
    const size_t placed = cfg.probe_count() - std::min(refused.size(), cfg.probe_count());
    if (filter_pid > 0 && placed >= kHoldSites && !target_exited && !target_execd) {
      held_detach = detach_holding_threads(filter_pid, [&] {
        attachment.detach();
        lib_attachment.detach();
      });
      if (!held_detach->held && !eo.quiet)
        std::cerr << "gotap: warning: removing " << placed
                  << " probes with the program running (slow under load): " << held_detach->why_not
                  << "\n";
    } else {
      attachment.detach();
      lib_attachment.detach();
    }
  }
  sys::timing_mark("ebpf: detached");
  const double detach_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t_detach).count();
  if (rb && !session.failed) ring_buffer__consume(rb.get());
  metrics_end.now();
  // A launched program that replaced itself runs untraced, but it is still the trace's, ended
  // with it (as ptrace's end_launched does).
  if (target_execd && target.launched())
    while (!stopping() && !target.exited() &&
           !(opts.duration_s > 0 &&
             std::chrono::duration<double>(Clock::now() - t_start).count() >= opts.duration_s))
      poll(nullptr, 0, 20);
  if (!target_exited) target.terminate();
  if (session.failed) {
    sink.flush();
    return runtime_error("the trace failed after the probes were placed (they are removed): {}",
                         *session.failed);
  }

  // Aggregates and leftovers.
  std::vector<uint64_t> counters(GOTAP_CNT_NUM, 0);
  int cfd = bpf_map__fd(skel->maps.counters);
  for (uint32_t k = 0; k < GOTAP_CNT_NUM; ++k) counters[k] = read_percpu_u64(cfd, k);

  if (session.goroutines) session.events += session.goroutines->events();
  if (mode == Mode::Count) {
    int fd = bpf_map__fd(skel->maps.counts);
    // Only functions that were called have a line: the others' names are not copied (a
    // whole binary has 10,000s of them); counts and failures come in batches, whole.
    std::vector<FuncCount> counts;
    const std::vector<uint64_t> calls =
        read_percpu_u64_all(fd, static_cast<uint32_t>(cfg.funcs.size()));
    const auto failed = read_failed_all(skel.get(), cfg);
    std::map<uint32_t, std::vector<ProcessCount>> by_process;
    if (filter_pid == 0) by_process = read_proc_counts(bpf_map__fd(skel->maps.proc_counts));
    for (uint32_t f = 0; f < cfg.funcs.size(); ++f) {
      if (!calls[f]) continue;
      FuncCount c{cfg.funcs[f].plan->name, calls[f], failed[f]};
      if (filter_pid == 0) {
        c.processes = std::move(by_process[f]);
        uint64_t told = 0;
        for (const auto& p : *c.processes) told += p.count;
        c.processes_lost = calls[f] > told ? calls[f] - told : 0;
      }
      counts.push_back(std::move(c));
    }
    for (const auto& ev : count_events(std::move(counts))) {
      sink.emit(ev);
      ++session.events;
    }
  } else if (mode == Mode::Latency) {
    int sfd = bpf_map__fd(skel->maps.lat_stats);
    int hfd = bpf_map__fd(skel->maps.lat_hist);
    std::vector<FuncLatency> latencies;
    std::map<std::string, uint32_t> ids;
    const auto failed = read_failed_all(skel.get(), cfg);
    for (auto& [f, l] : read_latency_all(sfd, hfd, static_cast<uint32_t>(cfg.funcs.size())))
      if (l.count) {
        latencies.push_back({cfg.funcs[f].plan->name, std::move(l), failed[f]});
        ids[cfg.funcs[f].plan->name] = f;
      }
    WhySums sums;
    if (why_agg &&
        !read_why_sums(bpf_map__fd(skel->maps.why_parts), bpf_map__fd(skel->maps.why_waits),
                       bpf_map__fd(skel->maps.why_sys), sums))
      ++session.decode_failures;
    for (Event ev : latency_events(std::move(latencies))) {
      if (why_agg) {
        auto [why, slowest] = why_of(sums[ids[ev.value("func", "")]], why_names);
        ev["why"] = std::move(why);
        ev["why_slowest"] = std::move(slowest);
      }
      sink.emit(ev);
      ++session.events;
    }
  } else {
    // Calls still in flight never returned while we watched: `unfinished`, ending now, as
    // the ptrace backend reports them (docs/json.md).
    const uint64_t end_ns = sys::monotonic_ns();
    std::vector<CallUnfinished> open;
    for_each_entry<gotap_call_key, gotap_inflight>(
        bpf_map__fd(skel->maps.inflight), [&](const gotap_call_key& k, const gotap_inflight& in) {
          // A call --rate left out, one its condition rejected, or one whose condition waits
          // for the return, is not reported at all, unfinished or not.
          if (k.func_id < cfg.funcs.size() && cfg.funcs[k.func_id].traced_returns &&
              !(in.flags & GOTAP_INFLIGHT_DROPPED) && in.ts != 0 &&
              !(opts.condition && opts.condition->at_ret(k.func_id)) && !budget.detached(k.func_id))
            open.emplace_back(
                CallSite{end_ns, int(in.pid), int(in.tid), cfg.no_goid ? kNoGoid : int64_t(k.goid),
                         cfg.funcs[k.func_id].plan->name},
                in.ts);
        });
    for (const auto& ev : unfinished_events(std::move(open))) {
      sink.emit(ev);
      ++session.events;
    }
  }

  RunSummary sum;
  sum.backend = "ebpf";
  sum.ts_ns = sys::monotonic_ns();
  sum.functions = cfg.funcs.size();
  sum.probes = cfg.probe_count();
  sum.events = session.events;
  sum.lost = counters[GOTAP_CNT_LOST] + session.decode_failures;
  sum.pid = filter_pid > 0 ? filter_pid : 0;
  sum.ended_by = target_execd ? "exec" : target_exited ? "exit" : "stop";
  // An attached process's status from the kernel's exit of its leader (gotap_exit), which
  // runs before the pidfd says it exited.
  const bool status_known =
      target.launched() || (skel->links.gotap_exit && skel->bss->target_exit_seen);
  if (target_exited && status_known) {
    int st =
        target.launched() ? target.exit_status() : static_cast<int>(skel->bss->target_exit_status);
    if (WIFEXITED(st)) sum.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) {
      sum.exit_code = 128 + WTERMSIG(st);
      sum.exit_signal = WTERMSIG(st);
    }
  }
  sum.extra = {{"unmatched_returns", counters[GOTAP_CNT_UNMATCHED_RET]},
               {"refires_ignored", counters[GOTAP_CNT_REFIRE]},
               {"goid_read_errors", counters[GOTAP_CNT_READ_ERR]},
               {"inflight_full", counters[GOTAP_CNT_INFLIGHT_FULL]},
               {"attach", attachment.method()},
               {"skipped_sites", refused.size()},
               {"attach_ms", attach_ms},
               {"detach_ms", detach_ms}};
  if (held_detach) sum.extra["detach_held_threads"] = held_detach->held;
  if (stats) {
    sum.extra["bpf_run_ns"] = stats->run_ns;
    sum.extra["bpf_runs"] = stats->runs;
  }
  if (opts.rate_per_s && mode == Mode::Trace) {
    uint64_t limited = 0;
    for (uint64_t n : read_percpu_u64_all(bpf_map__fd(skel->maps.rate_dropped),
                                          static_cast<uint32_t>(cfg.funcs.size())))
      limited += n;
    sum.extra["rate_limited"] = limited;
  }
  if (opts.condition) sum.extra["condition_held_full"] = counters[GOTAP_CNT_HELD_FULL];
  if (why_kernel) sum.extra["why_threads_full"] = counters[GOTAP_CNT_WHY_FULL];
  if (why_agg) {
    sum.extra["why_in_kernel"] = true;
    sum.extra["why_unnamed"] = counters[GOTAP_CNT_WHY_LOST];
    sum.extra["why_calls_lost"] = counters[GOTAP_CNT_WHY_CALLS_LOST];
  }
  if (measure_cost) {
    Event names = Event::array();
    for (uint32_t f = 0; f < cfg.funcs.size(); ++f)
      if (budget.detached(f)) names.push_back(cfg.funcs[f].plan->name);
    if (budget.detached(cfg.funcs.size())) names.push_back(kGoroutineProbes);
    sum.extra["detached"] = std::move(names);
  }
  sink.emit(to_event(sum));
  sink.flush();
  return {};
}

Result<void> EbpfBackend::run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) {
  EbpfOptions eo;
  // Benchmark knobs (bench/ebpf.sh): an empty program at the same sites is the probe-cost
  // baseline; the per-site fallback can be forced to compare attach methods.
  if (const char* e = getenv("GOTAP_EBPF_EMPTY_PROGRAM")) eo.empty_program = *e == '1';
  if (const char* e = getenv("GOTAP_EBPF_PER_SITE")) eo.force_per_site = *e == '1';
  // Scale and cost breakdown (bench/scale.sh, bench/ebpf-parts.sh): the ring buffer's size,
  // and where a trace event stops.
  if (const char* e = getenv("GOTAP_EBPF_RINGBUF_KB")) {
    char* end = nullptr;
    const unsigned long kb = strtoul(e, &end, 10);
    if (*e == '\0' || *end != '\0' || kb < 4 || kb > (1ul << 21) || (kb & (kb - 1)))
      return make_error("GOTAP_EBPF_RINGBUF_KB must be a power of two from 4 to 2097152, not '{}'",
                        e);
    eo.ringbuf_bytes = size_t(kb) << 10;
  }
  if (const char* e = getenv("GOTAP_EBPF_CUT")) {
    const std::string v = e;
    if (v == "nosubmit")
      eo.cut = EventCut::NoSubmit;
    else if (v == "nodecode")
      eo.cut = EventCut::NoDecode;
    else if (v == "noprint")
      eo.cut = EventCut::NoPrint;
    else if (!v.empty())
      return make_error("GOTAP_EBPF_CUT must be nosubmit, nodecode or noprint, not '{}'", v);
  }
  return run_session(plan, opts, sink, eo);
}

}  // namespace gotap::ebpf
