// The bytes the trampoline backend writes into a program, at run-time addresses: the
// trampolines (one slot each, core/plan/trampoline_code.h) and, at each site, the jump to its
// trampoline; then the writes themselves, made while every thread of the program is stopped
// (a jump written under a running thread could be fetched half old, half new).
//
// gotap writes a jump only over the file's own bytes, and takes it back only where its own
// jump is still there: a site another tracer holds (a uprobe's int3, a debugger's) is left to
// it. A uprobe put on a site after the jump keeps its int3 over the jump's first byte; the
// restore puts back the other bytes under it, so that the kernel finds the file's instruction
// once that uprobe goes. When the uprobe goes first, the kernel writes the file's first byte
// back: every jump begins with it or is that byte alone (trampoline_code.h), so the program
// is never left with half of one.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/ptrace/memory.h"
#include "backends/trampoline/owner.h"
#include "backends/trampoline/patch_set.h"
#include "core/model/result.h"
#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {

struct LiveSite {
  uint64_t at = 0;        // run-time address of the first byte written
  uint8_t len = 0;        // bytes written: the jbe's 6, or a short check's compare's 4
  uint8_t check_len = 0;  // the file's bytes that must be in place to patch (the whole range)
  int func = -1;          // the plan's function
  std::array<uint8_t, 16> orig{}, jump{};
  bool written = false;
  // A uprobe's int3 was seen over the jump's first byte during the trace (note_uprobes).
  bool uprobe_seen = false;
};

// The trampolines of one region (patch_set.h), whose pages are at `code` (and its counters
// after them), and each of its sites into `sites`. An error when one is out of reach.
// `owner` goes into the header (owner.h). `empty`: trampolines that count nothing (the lock
// inc a nop of its length), the bare jump there and back that the benchmarks measure apart
// (GOTAP_TRAMPOLINE_EMPTY=1).
struct RegionCode {
  std::vector<uint8_t> bytes;  // the whole code: int3 where no trampoline is
  // [offset, offset + length) to write: the pages that hold the header or a trampoline.
  std::vector<std::pair<uint64_t, uint64_t>> runs;
};
Result<RegionCode> build_trampolines(const PatchSet& set, const Region& region, uint64_t bias,
                                     uint64_t code, const Owner& owner,
                                     std::vector<LiveSite>& sites, bool empty = false);

// A timed run's trampolines (lay_out_timed): the first region's stubs and bodies, each
// body recording into the ring `events` names; the second's short-check stubs, each jumping
// to its body at bodies[patch index]. Sites: each jump whose target is in this region.
struct TimedCode {
  EventTarget events;
  std::vector<uint64_t> bodies;  // by PatchSet index, in the program
  // A tracing run's: what each body copies into its record, by PatchSet index (trace
  // records, events.shape kTraceRing); null for a timed run's records.
  const std::vector<RecordCapture>* captures = nullptr;
  // A counting run's (Run::fails_counted_): each body counts into the first region's
  // counter of its patch (entry_count_body, ret_fail_body), a RET's failure by its patch's
  // error word here (by PatchSet index); no record is written.
  const std::vector<CaptureWord>* fail_words = nullptr;
};
Result<RegionCode> build_timed(const PatchSet& set, const Region& region, uint64_t bias,
                               uint64_t code, const Owner& owner, const TimedCode& timed,
                               std::vector<LiveSite>& sites);

struct WriteTally {
  size_t written = 0;
  size_t foreign = 0;  // held by someone else: left alone
  size_t failed = 0;   // a write that did not go through
  // At a restore: sites where another tracer's uprobe went over the jump during the trace,
  // there still (its int3 on the jump's first byte), gone again from a short check (it put
  // back the file's first byte, which undid the jump: from then on), or seen by note_uprobes
  // on a jno and gone (while it was there). The kernel ran the file's instruction there
  // meanwhile: those calls were not counted.
  size_t taken = 0;
  // At a patch: a killed gotap's jumps, replaced by this one's.
  size_t replaced = 0;
};

// Marks the written 6-byte jumps (a jbe's jno) whose first byte is an int3 now: another
// tracer's uprobe, which takes their calls while it is there. When it goes, the kernel puts
// back the file's first byte, which is the jno's own: nothing at the restore would tell that
// it came. (A short check's one-byte jump is undone by that write, which the restore sees.)
// Read with process_vm_readv, the program running, 256 pages a call, `between` called
// between two (a timed run's reader drains its ring there: a whole binary's look takes tens
// of milliseconds, in which a busy program fills a ring).
void note_uprobes(pid_t pid, std::vector<LiveSite>& sites,
                  const std::function<void()>& between = nullptr);

// Who placed the region of trampolines whose code starts at `code`: the owner its header
// names (build_trampolines), or nullopt when it has none (not a gotap's, or unreadable).
std::optional<Owner> region_owner(ptrace::TraceeMemory& mem, uint64_t code);

// Whether `target` is a trampoline in pages a gotap mapped (their header, patch_set.h).
using IsOurs = std::function<bool(uint64_t target)>;

// Where a jump that another gotap left at `s` goes, when `now` (s.check_len bytes) holds one
// of s's form: for a 6-byte jbe, `jno rel32`; for a short check, `jmp` then the file's bytes.
std::optional<uint64_t> left_jump(const LiveSite& s, const uint8_t* now);
// A patch's site at run time, without its jump (for looks before the pages are placed).
LiveSite live_site(const Patch& p, uint64_t bias);
// What the program holds at s now: the file's bytes, a jump of s's form that `ours` accepts
// (a killed gotap's), another tracer's bytes, or nothing readable.
enum class SiteNow { File, Ours, Foreign, Unreadable };
SiteNow site_now(ptrace::TraceeMemory& mem, const LiveSite& s, const IsOurs& ours);

// Whether every byte at s that is not the file's is an int3 of a uprobe: `uprobes` holds
// the file offsets of the uprobes on the program's file (sys::uprobe_holders), `to_offset`
// a run-time address's file offset. The kernel shares such a site with another uprobe, where
// a debugger's int3 or another gotap's jump would be taken from its owner.
bool held_by_uprobes(ptrace::TraceeMemory& mem, const LiveSite& s,
                     const std::map<uint64_t, std::string>& uprobes,
                     const std::function<std::optional<uint64_t>(uint64_t)>& to_offset);

// Writes each site's jump where the program holds the file's bytes, or a jump of the same
// form that `ours` says a killed gotap left (its pages stay, unused).
WriteTally write_jumps(ptrace::TraceeMemory& mem, std::vector<LiveSite>& sites,
                       const IsOurs& ours = nullptr);
// Puts the file's bytes back where a jump was written and is still there (under a later
// uprobe's int3 too). `foreign`: sites whose bytes changed otherwise, left as they are.
WriteTally restore_jumps(ptrace::TraceeMemory& mem, std::vector<LiveSite>& sites);

}  // namespace gotap::trampoline
