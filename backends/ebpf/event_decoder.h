// Turns the BPF program's raw trace records into docs/json.md events: argument and result
// values from the captured words and copied bytes; what was not captured is {"raw":[...]}.
#pragma once

#include <cstddef>
#include <functional>

#include <memory>
#include <string>

#include "backends/ebpf/probe_config.h"
#include "core/binary/elf_file.h"
#include "core/binary/rtype.h"
#include "core/decode/value_decoder.h"
#include "core/events/events.h"
#include "core/events/typed_events.h"
#include "core/plan/binary_view.h"

namespace gotap::ebpf {

class EventMemory;

class EventDecoder {
 public:
  // rt: the type descriptors at link time; bias: what the tracee's addresses exceed the
  // file's by (PIE). Dynamic types are read from the file: their descriptors never change.
  // func_name: the function at a run-time pc, to name func values (may be empty).
  EventDecoder(const ProbeConfig& cfg, const TypeGraph* types, const ElfFile* elf, RtypeEnv rt,
               uint64_t bias, int max_str,
               std::function<std::string(uint64_t)> func_name = nullptr);
  ~EventDecoder();

  enum class Kind { None, Entry, Return };
  // The record as a call event, kept in entry() or ret() until the next one; None when the
  // record is malformed (wrong size, unknown probe).
  Kind decode_call(const void* data, size_t size);
  const CallEntry& entry() const { return entry_; }
  const CallReturn& ret() const { return ret_; }
  // The same as a JSON object: an empty object when the record is malformed.
  Event decode(const void* data, size_t size);
  // --stack N: symbolize the return addresses the kernel walked through `bin`.
  void set_stack(const BinaryView* bin, int depth) {
    stack_bin_ = bin;
    stack_depth_ = depth;
  }

 private:
  nlohmann::json value(const ParamCapture& pc, const gotap_event& ev) const;
  const ProbeConfig& cfg_;
  // The tracee's memory as one event shows it (event_decoder.cpp), and core's decoder over
  // it: built once, refilled per value. Neither is const; the decoder's methods are.
  std::unique_ptr<EventMemory> mem_;
  std::unique_ptr<ValueDecoder> dec_;
  int max_str_;
  uint64_t bias_;
  const BinaryView* stack_bin_ = nullptr;
  int stack_depth_ = 0;
  CallEntry entry_;
  CallReturn ret_;
};

}  // namespace gotap::ebpf
