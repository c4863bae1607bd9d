// The eBPF backend: kernel uprobes at the plan's entry probes and RET sites, one BPF program
// configured per site through a map. Count and latency aggregate in the kernel; trace streams
// events through a ring buffer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/backend.h"
#include "core/binary/rtype.h"

namespace gotap::ebpf {

// Benchmark only (GOTAP_EBPF_CUT, bench/ebpf-parts.sh): where a trace event stops, so that
// each part of its cost can be measured alone. A cut event is neither reported nor lost.
enum class EventCut {
  None,
  NoSubmit,  // captured by the BPF program, never put in the ring buffer
  NoDecode,  // read from the ring buffer, not decoded
  NoPrint,   // decoded, not handed to the output
};

struct EbpfOptions {
  bool empty_program = false;        // attach a program that does nothing (probe cost baseline)
  bool force_per_site = false;       // skip uprobe_multi (tests the fallback)
  size_t ringbuf_bytes = 16u << 20;  // GOTAP_EBPF_RINGBUF_KB: a power of two >= 4 KiB
  EventCut cut = EventCut::None;
  bool quiet = false;  // no "Tracing ..." line
  // A session inside another backend's run (the trampoline backend's fallback,
  // backends/trampoline/fallback.h): no "Tracing ..." line of its own (its warnings stay),
  // ended by `*stop` as by a stop request, `on_live` called once its probes are live (with
  // how many, and the process's pid),
  // and, with `image_locked`, the caller holding the executable's lock (core/sys/image_lock.h)
  // for it while it places its probes.
  bool banner = true;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(size_t probes, int pid)> on_live;
  // Trace: after each read of the ring buffer, the time it began (every event of a probe
  // that had run by then has been read and emitted, but for one still being written).
  std::function<void(uint64_t)> on_read;
  bool image_locked = false;
  // --why whose traced calls another backend sees (the trampoline backend's jumps): the
  // kernel follows every goroutine's thread, and sends every status change (bpf/why_kernel.h).
  bool why_every_goroutine = false;
};

// Runs one trace session of the plan's binary (plan.binary_view). Used by EbpfBackend::run and
// by tests, which set EbpfOptions.
Result<void> run_session(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink,
                         const EbpfOptions& eopts = {});

class EbpfBackend : public Backend {
 public:
  std::string name() const override { return "ebpf"; }
  Result<void> run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink) override;
};

// "" when this process can load BPF programs and attach uprobes; else why not.
std::string unavailable_reason();

}  // namespace gotap::ebpf
