#include "core/plan/cached_sites.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "core/plan/disasm.h"
#include "core/plan/parallel_for.h"
#include "core/plan/x86_quick.h"

namespace gotap {

namespace {

enum class Kind : uint8_t { Any, Entry, PushRbp, Jcc, Ret, Jmp, Call };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Any:
      return "an inline site";
    case Kind::Entry:
      return "an entry probe";
    case Kind::PushRbp:
      return "a push rbp";
    case Kind::Jcc:
      return "a conditional jump";
    case Kind::Ret:
      return "a RET";
    case Kind::Jmp:
      return "a JMP";
    case Kind::Call:
      return "a CALL";
  }
  return "";
}

struct Need {
  const PclnFunc* fn;  // the function whose code holds it
  uint64_t pc;
  Kind kind;
  const FuncPlan* of;  // for the message
};

// One instruction: its length and the kinds it is.
bool is_kind(Kind k, const uint8_t* at, const QuickInsn* q, const InsnKind& z) {
  switch (k) {
    case Kind::Any:
    case Kind::Entry:
      return true;
    case Kind::PushRbp:
      return *at == 0x55;  // `push rbp` as Go emits it, one byte
    case Kind::Jcc:
      return q ? q->flow == QuickInsn::kJcc : z.jcc;
    case Kind::Ret:
      return q ? q->flow == QuickInsn::kRet : z.ret;
    case Kind::Jmp:
      return q ? q->flow == QuickInsn::kJmp || q->flow == QuickInsn::kJmpIndirect : z.jmp;
    case Kind::Call:
      return q ? q->flow == QuickInsn::kCall : z.call;
  }
  return false;
}

std::string failed(const Need& n, std::string_view why) {
  return fmt::format("{}: {} at {:#x} {}", n.of->name, kind_name(n.kind), n.pc, why);
}

// The needs of one function, sorted by pc, against a linear decode of its code.
std::string check_function(const ElfFile& elf, const Need* first, const Need* last) {
  const PclnFunc& fn = *first->fn;
  Bytes code = fn.end > fn.entry ? elf.read(fn.entry, fn.end - fn.entry) : Bytes{};
  if (code.empty()) return failed(*first, "is in a function with no code in the file");
  size_t off = 0;
  const Need* n = first;
  while (n != last && off < code.size()) {
    const uint8_t* at = code.data() + off;
    QuickInsn q;
    InsnKind z;
    const bool quick = quick_decode(at, code.size() - off, q);
    unsigned len = quick ? q.len : (z = instruction_kind(code.subspan(off))).len;
    if (len == 0) break;
    const uint64_t pc = fn.entry + off;
    for (; n != last && n->pc <= pc; ++n) {
      if (n->pc < pc) return failed(*n, "is inside an instruction");
      if (!is_kind(n->kind, at, quick ? &q : nullptr, z))
        return failed(*n, "is another instruction");
    }
    off += len;
  }
  if (n != last) return failed(*n, "is not on an instruction the decoder reaches");
  return "";
}

}  // namespace

std::string check_cached_sites(const ElfFile& elf, const Pclntab& pcln,
                               const std::vector<FuncPlan>& funcs) {
  std::vector<Need> needs;
  needs.reserve(funcs.size() * 4);
  for (const FuncPlan& f : funcs) {
    if (f.entry == 0) {
      if (f.end || f.entry_probe || f.morestack_call || !f.ret_sites.empty() ||
          !f.tail_jumps.empty())
        return fmt::format("{}: a function that exists only inlined has sites of its own", f.name);
    } else {
      const PclnFunc* fn = pcln.find(f.entry);
      if (!fn || fn->entry != f.entry || fn->end != f.end || fn->name != f.name)
        return fmt::format("{}: {:#x}-{:#x} is not that function's code", f.name, f.entry, f.end);
      Kind entry_kind = f.entry_probe_kind == "push_rbp" ? Kind::PushRbp
                        : f.entry_probe_kind == "jcc"    ? Kind::Jcc
                        : f.entry_probe_kind == "entry"  ? Kind::Entry
                                                         : Kind::Any;
      if (entry_kind == Kind::Any || (entry_kind == Kind::Entry && f.entry_probe != f.entry))
        return fmt::format("{}: entry probe '{}' at {:#x} is not one planning makes", f.name,
                           f.entry_probe_kind, f.entry_probe);
      auto add = [&](uint64_t pc, Kind k) {
        needs.push_back({fn, pc, k, &f});
        return pc >= f.entry && pc < f.end;
      };
      bool inside = add(f.entry_probe, entry_kind);
      for (uint64_t pc : f.ret_sites) inside &= add(pc, Kind::Ret);
      for (uint64_t pc : f.tail_jumps) inside &= add(pc, Kind::Jmp);
      if (f.morestack_call) inside &= add(f.morestack_call, Kind::Call);
      if (!inside) return fmt::format("{}: a site is outside {:#x}-{:#x}", f.name, f.entry, f.end);
    }
    // Inline sites lie in the function the call was inlined into.
    for (const InlineSite& s : f.inline_sites) {
      const PclnFunc* outer = pcln.find(s.pc);
      if (!outer || outer->name != s.outer || s.pc < outer->entry || s.pc >= outer->end)
        return fmt::format("{}: inline site at {:#x} is not in {}", f.name, s.pc, s.outer);
      needs.push_back({outer, s.pc, Kind::Any, &f});
    }
  }
  std::sort(needs.begin(), needs.end(), [](const Need& a, const Need& b) {
    return a.fn->entry != b.fn->entry ? a.fn->entry < b.fn->entry : a.pc < b.pc;
  });
  // Each function decoded once, on every CPU; the code given back to the system a batch at
  // a time, as planning does (a whole binary's text would otherwise stay resident).
  std::vector<std::pair<size_t, size_t>> groups;  // [first, last) of each function's needs
  for (size_t i = 0; i < needs.size();) {
    size_t j = i;
    while (j < needs.size() && needs[j].fn == needs[i].fn) ++j;
    groups.push_back({i, j});
    i = j;
  }
  constexpr size_t kBatch = 4096;
  for (size_t lo = 0; lo < groups.size(); lo += kBatch) {
    const size_t hi = std::min(groups.size(), lo + kBatch);
    std::vector<std::string> why(hi - lo);
    parallel_for(hi - lo, [&](size_t k) {
      const auto [first, last] = groups[lo + k];
      why[k] = check_function(elf, &needs[first], needs.data() + last);
    });
    for (std::string& w : why)
      if (!w.empty()) return w;
    const uint64_t from = needs[groups[lo].first].fn->entry;
    const uint64_t to = needs[groups[hi - 1].first].fn->end;
    if (to > from) elf.release(from, to - from);
  }
  return "";
}

}  // namespace gotap
