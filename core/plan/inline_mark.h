// Where to probe one inlined call so that the probe fires exactly once per call, and never on
// a path that does not make the call. docs/design.md ("Inlined calls") says why this holds.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/binary/elf_file.h"

namespace gotap {

// One decoded instruction of a function, with what the block structure needs.
struct CodeInsn {
  uint64_t pc = 0;
  uint8_t len = 0;
  bool leader = false;        // starts a basic block (entry, a jump target, after a branch)
  bool nop1 = false;          // the one-byte NOP (0x90) that Go emits as an inline mark
  bool falls_through = true;  // false after an unconditional JMP, RET, INT3, UD2
  uint64_t target = 0;        // a direct branch's target (0: none)
  // What analyze_function needs, from the same decode (core/plan/disasm.h): a RET, a JMP
  // with a known target (`target`), a JMP through a register or memory.
  static constexpr uint8_t kRet = 1, kJmpDirect = 2, kJmpIndirect = 4;
  uint8_t flags = 0;
};

// The instructions of [entry, entry + code.size()) in order, with basic-block leaders.
// `indirect` is set when the function has an indirect JMP (a jump table or a tail call):
// its targets are not known, so neither are all the leaders.
struct CodeBlocks {
  std::vector<CodeInsn> insns;
  bool complete = false;  // every byte decoded
  uint64_t error_at = 0;  // when not complete: where decoding stopped
  bool indirect = false;
  // Index of the instruction starting at pc, or -1.
  int64_t index_of(uint64_t pc) const;
  // When filled (decode_blocks of complete code): index_of by offset from the first
  // instruction, -1 inside an instruction.
  std::vector<int32_t> at_offset;

  // Basic blocks (filled when complete): the block of each instruction, each block's first
  // instruction, predecessors, and immediate dominator (-1 for the entry and for blocks not
  // reachable from it).
  std::vector<int32_t> block_of;
  std::vector<int64_t> block_start;
  std::vector<int32_t> pred_start, pred_list;  // b's: pred_list[pred_start[b], pred_start[b + 1])
  std::span<const int32_t> preds(int32_t b) const {
    return {pred_list.data() + pred_start[b], pred_list.data() + pred_start[b + 1]};
  }
  std::vector<int32_t> idom;
  // Each block's interval in a depth-first walk of the dominator tree (-1: unreachable): a
  // dominates b when a's interval holds b's. The chooser asks once per instruction and
  // inlined call; walking up idom instead took 44% of planning a whole binary (caddy).
  std::vector<int32_t> dom_in, dom_out;
  // Whether every path from the entry to block b passes block a (a == b included); false
  // when b is unreachable.
  bool dominates(int32_t a, int32_t b) const;
};
// Without `dominators`, the instructions alone (and their leaders): what analyze_function
// needs, for a function whose inlined calls are not asked about.
CodeBlocks decode_blocks(Bytes code, uint64_t entry, bool dominators = true);

// What the chooser needs to know about each pc of the outer function.
struct InlineFacts {
  // The innermost inline-tree node at pc (-1: the outer function's own code).
  std::function<int32_t(uint64_t)> node_at;
  // node_at of each instruction of the CodeBlocks, when filled: asked once per instruction
  // and node, it is worth computing once per instruction.
  std::vector<int32_t> insn_node;
  // Whether the chain of nodes from `node` outwards contains `wanted`.
  std::function<bool(int32_t node, int32_t wanted)> within;
  // Whether the instructions at a and b have the same file and line.
  std::function<bool(uint64_t a, uint64_t b)> same_line;

  // Optional (index_inline_facts fills them): the chooser then looks at the instructions of
  // the node's body and of the call's line only, instead of every instruction once per node
  // (a function with thousands of inlined calls asked millions of questions). The answers
  // are the same.
  bool indexed = false;
  // Per node n (0 <= n < within_start.size() - 1), the instructions whose chain of nodes
  // contains it, as `within` walks it: within_insns[within_start[n], within_start[n + 1]),
  // ascending. Flat arrays: a map of vectors allocated once per node.
  std::vector<int32_t> within_start, within_insns;
  // Per instruction, its file (an id among the function's files, by their bytes) and line
  // as one key: equal when same_line says so (-1: no line).
  std::vector<int64_t> insn_line;
  // Every instruction with a line, by (its node exactly, its line key, its index).
  struct AtLine {
    int32_t node;
    int64_t line;
    int32_t insn;
    auto operator<=>(const AtLine&) const = default;
  };
  std::vector<AtLine> at_line;
};

// Fills facts' indexes for `code` (complete, with insn_node filled). parent: a node's parent
// (-1 at the outer function), as `within` follows it; line_at: an instruction's file and line.
void index_inline_facts(
    InlineFacts& facts, const CodeBlocks& code, const std::function<int32_t(int32_t)>& parent,
    const std::function<std::optional<std::pair<std::string_view, int32_t>>(uint64_t)>& line_at);

struct InlineMarkChoice {
  bool ok = false;
  uint64_t pc = 0;          // the probe site when ok
  std::string_view reason;  // why not, when !ok (a string literal)
};

// The probe site of inline node `node` whose call-site mark (the inline tree's parentPc) is
// `mark`: the mark itself when it provably runs once per call, else none.
InlineMarkChoice choose_inline_site(const CodeBlocks& code, const InlineFacts& facts, int32_t node,
                                    uint64_t mark);

}  // namespace gotap
