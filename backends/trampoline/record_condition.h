// --if on the trampoline backend's trace records (`trace`, `graph`): gotap runs the same
// compiled condition (core/cond) as the other backends, in its reader, on what each record
// captured at the call. A condition adds to its sites' capture (trace_capture.h) every word
// it reads there: registers, stack slots, the fields it follows through Go pointers (Deref
// words), the strings it compares (copies as long as the comparison reads) and itab type
// words. So each call is decided on the values it had, as eBPF decides it at the probe; a
// condition that reads what a record cannot hold (an element of a slice by index, a map, a
// string longer than a record's room) leaves its function to kernel uprobes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/trampoline/trace_capture.h"
#include "core/cond/condition.h"
#include "core/cond/eval.h"

namespace gotap::trampoline {

// Adds to `cap` (a site's capture, its own words and copies first) what the part of `prog`
// that runs there (its entry part, or its return part: `at_ret`) reads; "" when it fits, else
// why it cannot be captured (`cap` is then not to be used).
std::string add_condition_capture(const gotap_cond& prog, bool at_ret, RecordCapture& cap);

class RecordCondition {
 public:
  RecordCondition(const cond::Condition& cond, uint64_t bias) : cond_(cond), bias_(bias) {}
  // Whether function `func` has a condition to run (one that can select some call).
  bool on(size_t func) const;
  bool at_ret(size_t func) const { return cond_.at_ret(func); }
  // Runs the entry program (at_ret false) or the return program of `func` on `record`, whose
  // capture is `cap`; `bits` and `vals` carry what the entry keeps for the return.
  bool run(size_t func, bool at_ret, const uint8_t* record, const RecordCapture& cap, int64_t goid,
           uint64_t duration_ns, uint64_t& bits, uint64_t (&vals)[GOTAP_COND_VALS]);

 private:
  const cond::Condition& cond_;
  uint64_t bias_;
};

}  // namespace gotap::trampoline
