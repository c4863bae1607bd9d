#include "core/plan/trampoline_sites.h"

#include "core/plan/disasm.h"
#include "core/plan/inline_mark.h"
#include "core/plan/trampoline_code.h"

namespace gotap {

TrampolineSites trampoline_sites(const ElfFile* elf, const FuncPlan& f) {
  TrampolineSites t;
  auto refuse = [&](std::string why) {
    t.refused = std::move(why);
    t.untimed = t.refused;
    return t;
  };
  if (!f.entry || f.end <= f.entry) return refuse("it exists only inlined");
  t.code = elf ? elf->read(f.entry, f.end - f.entry) : Bytes{};
  if (t.code.size() != f.end - f.entry) return refuse("its code is not in the file");
  const CodeBlocks blocks = decode_blocks(t.code, f.entry, false);
  const FuncCode fc = analyze_function(t.code, f.entry, blocks);
  // Go leaves the check out of a leaf with a small frame, and assembly out of NOSPLIT.
  if (!fc.stack_check || !fc.stack_check_jcc)
    return refuse("no stack check (a small leaf, or NOSPLIT)");
  t.entry = stack_check_branch_site(t.code, f.entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
  if (!t.entry.ok()) {
    const JumpSite s =
        stack_check_short_site(t.code, f.entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
    // The short check's reason when the jbe is short (a compare of another length).
    if (!s.ok()) return refuse(s.refused == "not a short jbe" ? t.entry.refused : s.refused);
    t.entry = s;
    t.short_check = true;
  }
  if (!f.tail_jumps.empty()) {
    t.untimed = "a tail call leaves it without its RET";
    return t;
  }
  if (f.ret_sites.empty()) t.untimed = "it never returns (no RET)";
  for (uint64_t ret : f.ret_sites) {
    JumpSite r = ret_epilogue_site(t.code, f.entry, blocks, ret);
    // A program loaded where it was linked (not PIE): a stub's place below the first MiB, or
    // wrapped past 0 (a displacement going back further than the site), can never be mapped.
    if (r.ok() && elf && !elf->is_pie()) {
      const uint64_t place =
          one_byte_jump_place(r.at, Bytes(t.code.data() + (r.at - f.entry), r.len));
      if (!mappable_place(place)) {
        r = JumpSite{};
        r.at = ret;
        r.refused = "its RET's trampoline would be below the program (a non-PIE's frame)";
      }
    }
    t.rets.push_back(r);
    if (!t.rets.back().ok() && t.untimed.empty()) t.untimed = t.rets.back().refused;
  }
  return t;
}

}  // namespace gotap
