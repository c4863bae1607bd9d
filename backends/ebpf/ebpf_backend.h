// The eBPF backend: kernel uprobes at the plan's entry probes and RET sites, one BPF program
// configured per site through a map. Count and latency aggregate in the kernel; trace streams
// events through a ring buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/backend.h"
#include "core/binary/rtype.h"

namespace gotap::ebpf {

struct EbpfOptions {
  bool empty_program = false;   // attach a program that does nothing (probe cost baseline)
  bool force_per_site = false;  // skip uprobe_multi (tests the fallback)
  size_t ringbuf_bytes = 16u << 20;
  bool quiet = false;  // no "Tracing ..." line
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
