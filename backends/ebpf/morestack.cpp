#include "backends/ebpf/morestack.h"

#include "core/plan/disasm.h"

namespace gotap::ebpf {

std::optional<uint64_t> morestack_call(const ElfFile& elf, const FuncPlan& f) {
  if (f.end <= f.entry) return std::nullopt;
  Bytes code = elf.read(f.entry, f.end - f.entry);
  if (code.empty()) return std::nullopt;
  FuncCode fc = analyze_function(code, f.entry);
  if (!fc.stack_check_jcc) return std::nullopt;
  uint64_t at = *fc.stack_check_jcc - f.entry;
  // JBE rel8 (76 xx) or JBE rel32 (0f 86 xx xx xx xx).
  int64_t target;
  if (at + 2 <= code.size() && code[at] == 0x76) {
    target = static_cast<int64_t>(at) + 2 + static_cast<int8_t>(code[at + 1]);
  } else if (at + 6 <= code.size() && code[at] == 0x0f && code[at + 1] == 0x86) {
    auto rel = le32(code, at + 2);
    if (!rel) return std::nullopt;
    target = static_cast<int64_t>(at) + 6 + static_cast<int32_t>(*rel);
  } else {
    return std::nullopt;
  }
  if (target < 0 || static_cast<uint64_t>(target) >= code.size()) return std::nullopt;
  // The slow path spills the argument registers, then calls morestack: the first CALL.
  uint64_t pc = static_cast<uint64_t>(target);
  for (int i = 0; i < 32 && pc < code.size(); ++i) {
    if (code[pc] == 0xe8) return f.entry + pc;
    unsigned len = instruction_length(code.subspan(pc), f.entry + pc);
    if (len == 0) return std::nullopt;
    pc += len;
  }
  return std::nullopt;
}

}  // namespace gotap::ebpf
