// Turns the core's ProbePlan into what the BPF program reads: one gotap_probe record per probe
// site (its index is the attach cookie), the site addresses, and per parameter which captured
// words and memory copies hold its value. Pure computation: testable without root.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/ebpf/value_kind.h"
#include "core/backend.h"
#include "core/events/goroutine_events.h"
#include "core/plan/plan.h"
#include "gotap_shared.h"

namespace gotap::ebpf {

// Where one parameter's value ended up in an event.
struct ParamCapture {
  const ParamLoc* param = nullptr;
  std::vector<int> words;  // indices into gotap_event.words, one per 8-byte word; -1: not
                           // captured (a float register, or past GOTAP_MAX_WORDS)
  int string_cap = -1;     // string bytes (GOTAP_CAP_STRING)
  int itab_cap = -1;       // the dynamic type word of a non-empty interface (GOTAP_CAP_ITAB)
  int payload_cap = -1;    // the bytes an interface's data word points to (GOTAP_CAP_DEREF)
  // An interface's value followed through the known types (GOTAP_CAP_CHAIN): chunks of memory,
  // each put back at its address (value_chain.h).
  int chain_cap = -1;
  // A struct's string fields: (cap, index into `words` of the string's data pointer), so that
  // the copied bytes can be found again by address.
  std::vector<std::pair<int, int>> field_caps;
  ValueShape shape = ValueShape::Other;
};

// Kept per site for the whole trace: small, since a whole binary has 100,000s of sites. The
// gotap_probe record the BPF program reads is in ProbeConfig::records, only for sites that
// capture words or memory (none of count's and latency's): 248 bytes each.
struct SiteConfig {
  static constexpr uint32_t kNoRecord = UINT32_MAX;
  uint64_t addr = 0;  // virtual address in the binary
  uint32_t func_id = 0;
  uint8_t flags = 0;                 // GOTAP_PROBE_*
  uint32_t record = kNoRecord;       // index into ProbeConfig::records
  std::vector<ParamCapture> params;  // args at an entry, results at a RET
  std::string inlined_in;            // an inlined copy's outer function
  // A RET of a function with an error result (GOTAP_PROBE_ERRCHECK): where the error's itab
  // word is; src GOTAP_SRC_NONE elsewhere. The loader writes it into the site_extra map.
  gotap_word err_word{};
  // --stack: the hit function's return address is at RSP + ret_off (the pcsp delta).
  int32_t ret_off = 0;
  // An entry that is also its function's RET: no uprobe of its own, the next site's (flagged
  // GOTAP_PROBE_ALSO_ENTRY) runs it first.
  bool folded = false;
  // A goroutine probe in libgo.so (GoroutineProbes::image), not in the planned binary.
  bool lib = false;
};

struct FuncConfig {
  const FuncPlan* plan = nullptr;
  bool traced_returns = false;  // RET sites are probed
  bool has_error = false;       // its RETs count failed calls (FAILED, errors map)
  // With has_error: its entry in the `errors` map. Only these functions have one: a whole
  // binary's per-CPU entry for each of its functions took 25 ms to make.
  uint32_t err_slot = 0;
};

struct ProbeConfig {
  std::vector<FuncConfig> funcs;     // index = func_id
  std::vector<SiteConfig> sites;     // index = attach cookie
  std::vector<gotap_probe> records;  // the captures of the sites that have any
  uint32_t error_funcs = 0;          // functions with has_error: the `errors` map's entries
  int inline_sites = 0;
  int morestack_sites = 0;
  int folded_sites = 0;  // sites with no uprobe of their own (SiteConfig::folded)
  // Caps of the casgstatus probe beyond the goid (cap 0); -1 when not captured.
  int gstatus_reason_cap = -1;  // g.waitreason, 1 byte
  int gstatus_origin_cap = -1;  // origin_span() of the g
  bool no_goid = false;         // the plan reads no g (gccgo): events carry kNoGoid

  // The uprobes the sites take: one per site but the folded ones.
  size_t probe_count() const { return sites.size() - static_cast<size_t>(folded_sites); }
  // Site i's record in the `probes` map.
  gotap_probe record(size_t i) const;
  // Appends a site whose record is `p` (func_id and flags from it).
  SiteConfig& add_site(uint64_t addr, const gotap_probe& p);
};

// Adds the entry probes of runtime.casgstatus and runtime.newproc1 when the plan has them
// (func_ids GOTAP_FUNC_GSTATUS and GOTAP_FUNC_GCREATE); `goid_off` is runtime.g's goid.
void add_goroutine_sites(ProbeConfig& cfg, const ProbePlan& plan);

// Bytes of an interface's payload copied in trace mode.
constexpr int kIfacePayloadBytes = 16;

// `max_str` bounds each string copy (and the per-event budget bounds them all). `types` (the
// DWARF types, may be null) tells strings and interfaces apart from other two-word values.
// Count mode probes the plan's morestack calls, where there are any, instead of RETs, and
// the RETs of functions with an error result for that result alone. With a condition
// (`cond`, may be null), count probes the returns of functions whose condition is decided
// there, and never counts with morestack sites. `count_failed` false (--no-failed) leaves the
// error results unread.
ProbeConfig build_probe_config(const ProbePlan& plan, Mode mode, int max_str,
                               const TypeGraph* types = nullptr,
                               const cond::Condition* cond = nullptr, bool count_failed = true);

}  // namespace gotap::ebpf
