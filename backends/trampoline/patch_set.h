// Which planned functions the trampoline backend can count, and where: the stack check of
// each, with the file's bytes there. A 6-byte `jbe rel32` is replaced alone
// (stack_check_branch_site); a short function's compare and 2-byte jbe take a jump whose
// trampoline must lie in a 16 MiB window about 1.9 GiB past it (stack_check_short_site).
// Made from the plan's binary alone, before any process is touched, so that what cannot be
// probed is said first; lay_out then groups the sites into the regions mapped in the program.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/plan/jump_site.h"
#include "core/plan/plan.h"

namespace gotap::trampoline {

// One trampoline slot: the longest trampoline (a relocated jbe, the count, the jump back: 23
// bytes) rounded up. Slot k is at kHeaderSize + k * kSlotSize in its region's code.
constexpr uint64_t kSlotSize = 32;
// Each region's code begins with kMagic (the rest of the header int3s): how a later gotap
// knows a jump that a killed one left for its own (site_patches.h).
constexpr uint64_t kHeaderSize = 64;
inline constexpr char kMagic[] = "gotap trampolines 1";
// One counter per function, a cache line each: two hot functions on two CPUs do not fight
// over one line.
constexpr uint64_t kCounterStride = 64;

struct Patch {
  int func = -1;                   // index into ProbePlan::funcs
  JumpSite site;                   // link-time addresses
  std::array<uint8_t, 16> orig{};  // the file's bytes at site.at, site.len of them
  bool short_check = false;        // stack_check_short_site
};

struct PatchSet {
  std::vector<Patch> patches;  // by function index
  // Why a planned function has no site: reason -> the functions' indexes.
  std::map<std::string, std::vector<int>> refused;
};

PatchSet plan_patches(const ProbePlan& plan);

// Pages mapped in the program: trampolines (slot k at code + k * kSlotSize), then counters
// (counter k at code + code_size + k * kCounterStride).
struct Region {
  // 0: anywhere within rel32 reach of the image (scratch_room.h); else at an address from
  // base to base_hi (both page-aligned) where the whole region is free, lowest first.
  uint64_t base = 0, base_hi = 0;
  std::vector<size_t> patches;  // indexes into PatchSet::patches, by slot
  uint64_t code_size() const;
  uint64_t counter_size() const;
};

// The regions for a program that loaded the binary at `bias`: one for the 6-byte jbes, one
// for the short checks of each 4 MiB of text, at the place their window asks for.
std::vector<Region> lay_out(const PatchSet& set, uint64_t bias);

// "2 of 5 functions have no trampoline site and are not counted (1 a short function: ...:
// main.a; 1 ...: main.b)", or "" when every function has one. At most 3 names a reason.
std::string refused_summary(const PatchSet& set, const ProbePlan& plan);

}  // namespace gotap::trampoline
