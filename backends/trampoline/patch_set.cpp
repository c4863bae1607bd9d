#include "backends/trampoline/patch_set.h"

#include <fmt/format.h>

#include <cstring>

#include "core/binary/elf_file.h"
#include "core/plan/disasm.h"
#include "core/plan/inline_mark.h"

namespace gotap::trampoline {

namespace {

constexpr uint64_t kPage = 4096;

uint64_t page_up(uint64_t n) {
  return (n + kPage - 1) & ~(kPage - 1);
}

}  // namespace

uint64_t Region::code_size() const {
  return page_up(kHeaderSize + patches.size() * kSlotSize);
}
uint64_t Region::counter_size() const {
  return page_up(patches.size() * kCounterStride);
}

std::vector<Region> lay_out(const PatchSet& set, uint64_t bias) {
  // A short check's trampoline lies between 0x76000000 and 0x76ffffff bytes past its jump.
  // The sites of one 4 MiB of text, with one region of at most 4 MiB that starts from
  // 0x76401000 to 0x76c00000 past that text's start, are all in their windows (jump_site.h).
  // The first place is taken when a killed gotap left its pages there.
  constexpr unsigned kChunkBits = 22;
  constexpr uint64_t kFarOffset = 0x76401000, kFarOffsetHi = 0x76c00000;
  std::vector<Region> out(1);
  std::map<uint64_t, size_t> far;  // chunk -> region
  for (size_t i = 0; i < set.patches.size(); ++i) {
    const Patch& p = set.patches[i];
    if (!p.short_check) {
      out[0].patches.push_back(i);
      continue;
    }
    const uint64_t chunk = (p.site.at + bias) >> kChunkBits;
    auto [it, fresh] = far.try_emplace(chunk, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().base = (chunk << kChunkBits) + kFarOffset;
      out.back().base_hi = (chunk << kChunkBits) + kFarOffsetHi;
    }
    out[it->second].patches.push_back(i);
  }
  if (out[0].patches.empty()) out.erase(out.begin());
  return out;
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
      if (s.ok() && f.entry_probe == *fc.stack_check_jcc) {
        // Where gotap's other backends probe the jbe, their int3 would land in the jump.
        set.refused["a short function whose jbe other gotaps probe (Go before 1.21)"].push_back(fi);
        continue;
      }
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
