// What a tracing trampoline (`trace`, `graph` on the trampoline backend) captures at each
// of its sites, and how its records become events: the eBPF backend's capture plan
// (backends/ebpf/probe_config.h) for the same function's entry and RETs, so that both
// backends read each argument and result from the same registers and stack slots and core's
// decoder (through the eBPF event decoder) turns them into the same values. Of the copies
// that plan makes, a trampoline makes those it can make without a fault-proof read (Go's own
// invariants make them safe: trampoline_code.h, RecordCapture): a string's or byte slice's
// bytes, an itab's type word, and an interface's payload where its dynamic type says the
// data word leads to readable bytes (CaptureCopy::Payload). What a payload leads to further
// (eBPF's chain) is not copied: the decoder shows those pointers' words.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/ebpf/probe_config.h"
#include "backends/trampoline/patch_set.h"
#include "core/cond/condition.h"
#include "core/model/result.h"
#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {

struct TraceSites {
  ebpf::ProbeConfig cfg;
  std::vector<RecordCapture> captures;  // by PatchSet index
  std::vector<uint32_t> probe;          // by PatchSet index: its site in cfg
  // By PatchSet index: how many of its capture's words and copies are its eBPF site's, which
  // the decoder reads; those past them are --if's (record_condition.h). Empty: all of them.
  std::vector<uint8_t> decoded_words, decoded_copies;
  // A tally's sites (`tally`: count and latency with a condition, call_tally.h), by PatchSet
  // index: which word of a RET's record is its error's type word, -1 for none (an entry, a
  // function without an error result, or --no-failed).
  std::vector<int8_t> err_word;
  // The ring's: records as small as the captures allow (record_ring_shape).
  RingShape shape = kTraceRing;
  // --stack N: each capture's last copy is its walk (CaptureCopy::Stack) of up to N - 1
  // return addresses; the decoder puts the site's pc first.
  int stack_depth = 0;
};

// The smallest ring shape whose records hold each of `captures` whole, in 4 MiB: the more
// records a ring holds, the fewer a burst drops. A tally's records have few words; a trace's
// without copies (numbers, pointers, an interface's two words) at most kTraceMaxWords, 256
// bytes; any copy (a string's bytes) takes a kTraceRing record, 512 bytes, whose room
// copy_room cuts it to.
RingShape record_ring_shape(const std::vector<RecordCapture>& captures);

// An error when a patch has no site of the same function (and kind) in the capture plan.
// With `cond` (--if; may be null), each site's capture holds what the condition reads there
// too; a function whose condition reads what a record cannot hold leaves `set` (its patches
// go, it joins set.refused), to be taken on kernel uprobes.
// `tally` (count and latency with a condition): the sites capture no argument or result to
// decode, only what the condition reads and, with `count_failed`, each RET's error type word.
// `stack_depth` (--stack N, trace): each site's record walks the goroutine's frames too; a
// function whose record has no room left for N - 1 return addresses leaves `set` as above.
Result<TraceSites> trace_sites(const ProbePlan& plan, PatchSet& set, int max_str,
                               const cond::Condition* cond = nullptr, bool tally = false,
                               bool count_failed = false, int stack_depth = 0);

// The capture of one eBPF probe record: its words and copies, in the same order. An
// interface's payload (eBPF's GOTAP_CAP_DEREF) is a place kept, nothing read, until
// add_payloads, which knows the interface's type word, makes it a CaptureCopy::Payload.
RecordCapture capture_of(const gotap_probe& p);
void add_payloads(const ebpf::SiteConfig& site, RecordCapture& cap);

// A trace record (event_ring.h) as the eBPF backend's event for site `probe` of `sites`,
// kind and duration given, time `ts_ns`, from process `pid`. Its size: the header, the
// words, and the copies' bytes packed (what the eBPF event decoder reads).
size_t to_ebpf_event(const uint8_t* record, const TraceSites& sites, uint32_t patch, int pid,
                     uint64_t ts_ns, std::optional<uint64_t> duration_ns, gotap_event& ev);

}  // namespace gotap::trampoline
