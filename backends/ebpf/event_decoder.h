// Turns the BPF program's raw trace records into docs/json.md events: argument and result
// values from the captured words and copied bytes; what was not captured is {"raw":[...]}.
#pragma once

#include <cstddef>

#include <optional>

#include "backends/ebpf/probe_config.h"
#include "core/binary/elf_file.h"
#include "core/binary/rtype.h"
#include "core/events/events.h"

namespace gotap::ebpf {

class EventDecoder {
 public:
  // rt: the type descriptors at link time; bias: what the tracee's addresses exceed the
  // file's by (PIE). Dynamic types are read from the file: their descriptors never change.
  EventDecoder(const ProbeConfig& cfg, const TypeGraph* types, const ElfFile* elf, RtypeEnv rt,
               uint64_t bias, int max_str);

  // nullopt-like: an empty object when the record is malformed (wrong size, unknown probe).
  Event decode(const void* data, size_t size) const;

 private:
  nlohmann::json value(const ParamCapture& pc, const gotap_event& ev) const;
  // The descriptor at a tracee address, when it is one of this binary's.
  std::optional<RType> rtype(uint64_t addr) const;
  // An interface from its two words (tracee addresses), decoded over the file's immutable
  // bytes: w0 is the type (eface true), an itab (false), or either (nullopt: guessed, for
  // untyped ArgInfo words).
  std::optional<nlohmann::json> interface_from_file(uint64_t w0, uint64_t w1,
                                                    std::optional<bool> eface = {}) const;
  const ProbeConfig& cfg_;
  const TypeGraph* types_;
  // The file's immutable bytes (null without a file), read on every interface value: built
  // once. Its read() is not const, the decoder's methods are.
  mutable std::optional<ImmutableElfMemoryReader> file_;
  RtypeEnv rt_;  // link-time addresses
  uint64_t bias_;
  int max_str_;
};

}  // namespace gotap::ebpf
