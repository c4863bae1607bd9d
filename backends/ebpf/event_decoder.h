// Turns the BPF program's raw trace records into docs/json.md events: argument and result
// values from the captured words and copied bytes; what was not captured is {"raw":[...]}.
#pragma once

#include <cstddef>

#include "backends/ebpf/probe_config.h"
#include "backends/ebpf/type_names.h"
#include "core/events.h"

namespace gotap::ebpf {

class EventDecoder {
 public:
  EventDecoder(const ProbeConfig& cfg, const TypeGraph* types, const TypeNames* names)
      : cfg_(cfg), types_(types), names_(names) {}

  // nullopt-like: an empty object when the record is malformed (wrong size, unknown probe).
  Event decode(const void* data, size_t size) const;

 private:
  nlohmann::json value(const ParamCapture& pc, const gotap_event& ev) const;
  const ProbeConfig& cfg_;
  const TypeGraph* types_;
  const TypeNames* names_;
};

}  // namespace gotap::ebpf
