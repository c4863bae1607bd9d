#include "backends/trampoline/patch_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/binary/elf_file.h"
#include "core/plan/disasm.h"
#include "core/plan/inline_mark.h"
#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {

namespace {

constexpr uint64_t kPage = 4096;

uint64_t page_up(uint64_t n) {
  return (n + kPage - 1) & ~(kPage - 1);
}

}  // namespace

uint64_t Region::counter_size() const {
  return page_up(patches.size() * kCounterStride);
}

uint64_t short_trampoline(const Patch& p, uint64_t bias) {
  JumpSite s = p.site;
  s.at += bias;
  return short_site_trampoline(s, Bytes(p.orig.data(), s.len));
}

std::vector<Region> lay_out(const PatchSet& set, uint64_t bias) {
  Region near, far;
  for (size_t i = 0; i < set.patches.size(); ++i) {
    if (set.patches[i].short_check) {
      far.patches.push_back(i);
      continue;
    }
    near.at.push_back(kHeaderSize + near.patches.size() * kSlotSize);
    near.patches.push_back(i);
  }
  near.size = page_up(kHeaderSize + near.patches.size() * kSlotSize);
  std::vector<Region> out;
  if (!near.patches.empty()) out.push_back(std::move(near));
  if (far.patches.empty()) return out;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i : far.patches) {
    const uint64_t t = short_trampoline(set.patches[i], bias);
    lo = std::min(lo, t);
    hi = std::max(hi, t + kSlotSize);
  }
  far.base = lo & ~(kPage - 1);
  if (lo - far.base < kHeaderSize) far.base -= kPage;
  far.size = page_up(hi) - far.base;
  for (size_t i : far.patches) far.at.push_back(short_trampoline(set.patches[i], bias) - far.base);
  out.push_back(std::move(far));
  return out;
}

void drop_crowded(PatchSet& set) {
  std::vector<std::pair<uint64_t, size_t>> fixed;
  for (size_t i = 0; i < set.patches.size(); ++i)
    if (set.patches[i].short_check) fixed.emplace_back(short_trampoline(set.patches[i], 0), i);
  std::sort(fixed.begin(), fixed.end());
  std::vector<bool> crowded(set.patches.size());
  uint64_t free_from = 0;
  for (const auto& [at, i] : fixed) {
    if (at < free_from)
      crowded[i] = true;
    else
      free_from = at + kSlotSize;
  }
  size_t kept = 0;
  for (size_t i = 0; i < set.patches.size(); ++i) {
    if (crowded[i])
      set.refused["a short function whose trampoline's place is another's"].push_back(
          set.patches[i].func);
    else
      set.patches[kept++] = set.patches[i];
  }
  set.patches.resize(kept);
}

PatchSet plan_patches(const ProbePlan& plan) {
  PatchSet set;
  const ElfFile* elf = plan.binary_view.elf;
  for (size_t i = 0; i < plan.funcs.size(); ++i) {
    const FuncPlan& f = plan.funcs[i];
    const int fi = static_cast<int>(i);
    if (!f.entry || f.end <= f.entry) {
      set.refused["it exists only inlined"].push_back(fi);
      continue;
    }
    const Bytes code = elf ? elf->read(f.entry, f.end - f.entry) : Bytes{};
    if (code.size() != f.end - f.entry) {
      set.refused["its code is not in the file"].push_back(fi);
      continue;
    }
    const CodeBlocks blocks = decode_blocks(code, f.entry, false);
    const FuncCode fc = analyze_function(code, f.entry, blocks);
    if (!fc.stack_check || !fc.stack_check_jcc) {
      // Go leaves the check out of a leaf with a small frame, and assembly out of NOSPLIT.
      set.refused["no stack check (a small leaf, or NOSPLIT)"].push_back(fi);
      continue;
    }
    Patch p;
    p.func = fi;
    p.site = stack_check_branch_site(code, f.entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
    if (!p.site.ok()) {
      const JumpSite s =
          stack_check_short_site(code, f.entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
      if (!s.ok()) {
        // The short check's reason when the jbe is short (a compare of another length).
        set.refused[s.refused == "not a short jbe" ? p.site.refused : s.refused].push_back(fi);
        continue;
      }
      p.site = s;
      p.short_check = true;
    }
    std::memcpy(p.orig.data(), code.data() + (p.site.at - f.entry), p.site.len);
    set.patches.push_back(p);
  }
  drop_crowded(set);
  return set;
}

std::string refused_summary(const PatchSet& set, const ProbePlan& plan) {
  size_t n = 0;
  for (const auto& [why, funcs] : set.refused) n += funcs.size();
  if (!n) return "";
  std::string parts;
  for (const auto& [why, funcs] : set.refused) {
    std::string names;
    for (size_t k = 0; k < funcs.size() && k < 3; ++k)
      names += (k ? ", " : "") + plan.funcs[funcs[k]].name;
    if (funcs.size() > 3) names += ", ...";
    parts += fmt::format("{}{} {}: {}", parts.empty() ? "" : "; ", funcs.size(), why, names);
  }
  return fmt::format("{} of {} function{} {} no trampoline site and {} not counted ({})", n,
                     plan.funcs.size(), plan.funcs.size() == 1 ? "" : "s", n == 1 ? "has" : "have",
                     n == 1 ? "is" : "are", parts);
}

}  // namespace gotap::trampoline
