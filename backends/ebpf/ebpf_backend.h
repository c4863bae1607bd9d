// The eBPF backend: kernel uprobes at the plan's entry probes and RET sites, one BPF program
// configured per site through a map. Count and latency aggregate in the kernel; trace streams
// events through a ring buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/backend.h"
#include "core/binary/rtype.h"

namespace gotap::ebpf {

// What the backend needs of the binary besides the plan; GoBinary provides all of it, tests
// can fill it from an ElfFile alone.
struct BinaryView {
  const ElfFile* elf = nullptr;
  std::string path;                  // the file the probes go into
  const TypeGraph* types = nullptr;  // DWARF's or method tables' types, may be null
  RtypeEnv rt;                       // the type descriptors (link-time), for dynamic types
  GoVersion go;
  // The function containing a link-time pc ("" when none): names goroutines' start functions
  // and creation sites.
  std::function<std::string(uint64_t)> func_name;
};

BinaryView view_of(const GoBinary& bin);

struct EbpfOptions {
  bool empty_program = false;   // attach a program that does nothing (probe cost baseline)
  bool force_per_site = false;  // skip uprobe_multi (tests the fallback)
  size_t ringbuf_bytes = 16u << 20;
  bool quiet = false;  // no "Tracing ..." line
};

// Runs one trace session. Used by EbpfBackend::run and by tests (hand-built plans).
Result<void> run_session(const BinaryView& bin, const ProbePlan& plan, const TraceOptions& opts,
                         EventSink& sink, const EbpfOptions& eopts = {});

class EbpfBackend : public Backend {
 public:
  std::string name() const override { return "ebpf"; }
  Result<void> run(const GoBinary& bin, const ProbePlan& plan, const TraceOptions& opts,
                   EventSink& sink) override;
};

// "" when this process can load BPF programs and attach uprobes; else why not.
std::string unavailable_reason();

}  // namespace gotap::ebpf
