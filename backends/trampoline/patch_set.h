// Which planned functions the trampoline backend can count, and where: the stack check of
// each, with the file's bytes there. A 6-byte `jbe rel32` becomes a `jno rel32` to a
// trampoline anywhere in reach (stack_check_branch_site); a short function's compare gets a
// one-byte `jmp` whose trampoline has a fixed place about 1.9 GiB past it
// (stack_check_short_site). Made from the plan's binary alone, before any process is touched,
// so that what cannot be probed is said first; lay_out then places the regions mapped in the
// program.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/plan/event_ring.h"
#include "core/plan/jump_site.h"
#include "core/plan/plan.h"

namespace gotap::trampoline {

// One trampoline slot: the longest trampoline (a relocated jbe, the count, the jump back: 23
// bytes) rounded up. Slot k of the region for 6-byte jbes is at kHeaderSize + k * kSlotSize.
constexpr uint64_t kSlotSize = 32;
// Each region's code begins with kMagic (the rest of the header int3s): how a later gotap
// knows a jump that a killed one left for its own (site_patches.h).
constexpr uint64_t kHeaderSize = 64;
inline constexpr char kMagic[] = "gotap trampolines 2";
// One counter per function, a cache line each: two hot functions on two CPUs do not fight
// over one line.
constexpr uint64_t kCounterStride = 64;

struct Patch {
  int func = -1;                   // index into ProbePlan::funcs
  JumpSite site;                   // link-time addresses
  std::array<uint8_t, 16> orig{};  // the file's bytes at site.at, site.len of them
  bool short_check = false;        // stack_check_short_site
  bool ret = false;                // a RET's epilogue (ret_epilogue_site), timed runs only
  // Its jump is one byte, whose place is fixed by the file's bytes after it.
  bool one_byte() const { return short_check || ret; }
  // A RET whose stub is not in the window of Go 1.21's imm8 epilogues (ret_epilogue_form):
  // a frame of 128 bytes or more, or Go before 1.21. Its stub's place is 8 MiB to 2 GiB past
  // it, in a cluster region of its own (lay_out_timed).
  bool clustered() const {
    if (!ret) return false;
    const auto form = ret_epilogue_form(Bytes(orig.data(), site.len));
    return form && form->far;
  }
};

struct PatchSet {
  std::vector<Patch> patches;  // by function index
  // Why a planned function has no site: reason -> the functions' indexes.
  std::map<std::string, std::vector<int>> refused;
};

// `timed` (latency): each function's entry and every one of its RETs, or none of it.
// `entry_only` (may be null; by plan index): in a timed run, the functions whose records are
// needed at their entry alone (count with a condition decided there, and no failures to see).
PatchSet plan_patches(const ProbePlan& plan, bool timed = false,
                      const std::vector<bool>* entry_only = nullptr);

// Leaves out, as refused, each short check whose trampoline's fixed place overlaps an
// earlier one's (only when their compares are encoded differently: functions are 32 bytes
// apart at least, as the slots are, so one encoding never overlaps).
void drop_crowded(PatchSet& set);

// Leaves out, as refused, each function one of whose jumps covers the probe site of an
// inlined copy (InlineSite::pc), which count and trace put on kernel uprobes: the uprobe's
// int3 would go over the jump's first byte, and the kernel would run the file's code there
// for as long as it stays, the function's passes through it not seen (a RET's failures or
// records). Such a site is a RET's epilogue, where a copy inlined at a function's end with
// no code of its own has its mark. The function goes whole on the uprobes beside it.
void drop_inline_collisions(PatchSet& set, const ProbePlan& plan);

// Pages mapped in the program: trampolines, then counters (counter k at
// code + code_size() + k * kCounterStride, for patches[k]).
struct Region {
  // 0: anywhere within rel32 reach of the image (scratch_room.h); else exactly there.
  uint64_t base = 0;
  std::vector<size_t> patches;  // indexes into PatchSet::patches
  std::vector<uint64_t> at;     // where each one's trampoline starts, from the code's start
  uint64_t size = 0;            // of the code, whole pages
  // Timed runs (lay_out_timed): the body of each of `patches` (offsets from the code's
  // start; for a 6-byte jbe its `at`), and whether the event ring follows the counters.
  std::vector<uint64_t> body;
  bool ring = false;
  RingShape ring_shape = kTimedRing;
  // A cluster of RET stubs (lay_out_timed): jumps alone, no counter; its shared mapping is
  // one page, the least there is.
  bool stubs_only = false;
  uint64_t code_size() const { return size; }
  uint64_t counter_size() const;
  uint64_t ring_offset() const;  // from the counters' start
};

// The regions for a program that loaded the binary at `bias`: one for the 6-byte jbes, slot
// after slot, and one for the short checks, from the page of the first one's fixed place
// (or the page before, for the header) to the last one's. Only its pages that hold
// trampolines are ever written: the rest costs no memory.
std::vector<Region> lay_out(const PatchSet& set, uint64_t bias);

// A timed run's regions: one that holds the narrow RETs' stubs at their fixed places,
// every patch's body after them and the event ring; then the short checks' stubs at theirs
// (as lay_out); then the other RETs' stubs (Patch::clustered) in clusters (split where 64
// KiB are free, or past 1 MiB where three pages are), each a region at its place. Empty when the
// first's span would reach the second's window. A clustered RET whose stub would fall in the first
// two regions, or out of its body's reach, is in none: Run leaves its function out
// (stubless_functions). `body_len`: each patch's body's length (empty: kBodyMax each); `shape`: the
// ring's.
std::vector<Region> lay_out_timed(const PatchSet& set, uint64_t bias,
                                  const std::vector<size_t>& body_len = {},
                                  RingShape shape = kTimedRing);

// The functions one of whose one-byte jumps has no stub in `regions` (a timed function is
// patched whole or not at all).
std::vector<int> stubless_functions(const PatchSet& set, const std::vector<const Region*>& regions);

// Where a short check's trampoline must start (trampoline_code.h), for a program that
// loaded the binary at `bias`.
uint64_t short_trampoline(const Patch& p, uint64_t bias);

// "2 of 5 functions have no trampoline site and are not counted (1 a short function: ...:
// main.a; 1 ...: main.b)", or "" when every function has one; `done` says what they are not
// ("timed", "traced"). At most 3 names a reason.
// With `instead` ("kernel uprobes (eBPF)"): "... and are counted on kernel uprobes (eBPF) (...)".
std::string refused_summary(const PatchSet& set, const ProbePlan& plan,
                            const char* done = "counted", const char* instead = nullptr);

// The functions `set` refused, by plan index, in order.
std::vector<int> refused_functions(const PatchSet& set);

}  // namespace gotap::trampoline
