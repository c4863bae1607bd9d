#include "core/plan/inline_mark.h"

#include <Zydis/Zydis.h>

#include "core/plan/x86_quick.h"

#include <algorithm>
#include <array>

namespace gotap {

int64_t CodeBlocks::index_of(uint64_t pc) const {
  if (!at_offset.empty()) {
    if (insns.empty() || pc < insns.front().pc || pc - insns.front().pc >= at_offset.size())
      return -1;
    return at_offset[pc - insns.front().pc];
  }
  auto it = std::lower_bound(insns.begin(), insns.end(), pc,
                             [](const CodeInsn& i, uint64_t v) { return i.pc < v; });
  if (it == insns.end() || it->pc != pc) return -1;
  return it - insns.begin();
}

bool CodeBlocks::dominates(int32_t a, int32_t b) const {
  const auto n = static_cast<int32_t>(dom_in.size());
  if (a < 0 || b < 0 || a >= n || b >= n || dom_in[a] < 0 || dom_in[b] < 0) return false;
  return dom_in[a] <= dom_in[b] && dom_out[b] <= dom_out[a];
}

namespace {

// Blocks, predecessors and immediate dominators (Cooper, Harvey and Kennedy's iterative
// algorithm over the reverse postorder).
void build_dominators(CodeBlocks& c) {
  const int64_t n = static_cast<int64_t>(c.insns.size());
  c.block_of.assign(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || c.insns[i].leader) c.block_start.push_back(i);
    c.block_of[i] = static_cast<int32_t>(c.block_start.size()) - 1;
  }
  const int32_t nb = static_cast<int32_t>(c.block_start.size());
  // At most two successors a block (its branch's target, its fall-through), and predecessors
  // as one flat list (a vector per block was a good part of a whole binary's mallocs).
  std::vector<std::array<int32_t, 2>> succ(nb, {-1, -1});
  std::vector<uint8_t> nsucc(nb, 0);
  c.pred_start.assign(nb + 1, 0);
  for (int32_t b = 0; b < nb; ++b) {
    int64_t last = (b + 1 < nb ? c.block_start[b + 1] : n) - 1;
    const CodeInsn& t = c.insns[last];
    if (t.target) {
      int64_t k = c.index_of(t.target);
      if (k >= 0) succ[b][nsucc[b]++] = c.block_of[k];
    }
    if (t.falls_through && b + 1 < nb) succ[b][nsucc[b]++] = b + 1;
    for (int k = 0; k < nsucc[b]; ++k) ++c.pred_start[succ[b][k] + 1];
  }
  for (int32_t b = 0; b < nb; ++b) c.pred_start[b + 1] += c.pred_start[b];
  c.pred_list.resize(c.pred_start[nb]);
  {
    std::vector<int32_t> fill(c.pred_start.begin(), c.pred_start.end() - 1);
    for (int32_t b = 0; b < nb; ++b)
      for (int k = 0; k < nsucc[b]; ++k) c.pred_list[fill[succ[b][k]]++] = b;
  }
  // Reverse postorder from the entry, iteratively.
  std::vector<int32_t> order, rpo_index(nb, -1);
  std::vector<uint8_t> state(nb, 0);
  std::vector<std::pair<int32_t, size_t>> stack;
  if (nb) {
    stack.push_back({0, 0});
    state[0] = 1;
  }
  while (!stack.empty()) {
    auto& [b, k] = stack.back();
    if (k < nsucc[b]) {
      int32_t s = succ[b][k++];
      if (!state[s]) {
        state[s] = 1;
        stack.push_back({s, 0});
      }
    } else {
      order.push_back(b);
      stack.pop_back();
    }
  }
  std::reverse(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i) rpo_index[order[i]] = static_cast<int32_t>(i);
  c.idom.assign(nb, -1);
  if (!nb) return;
  c.idom[0] = 0;
  auto intersect = [&](int32_t a, int32_t b) {
    while (a != b) {
      while (rpo_index[a] > rpo_index[b]) a = c.idom[a];
      while (rpo_index[b] > rpo_index[a]) b = c.idom[b];
    }
    return a;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 1; i < order.size(); ++i) {
      int32_t b = order[i], nd = -1;
      for (int32_t p : c.preds(b)) {
        if (c.idom[p] < 0) continue;
        nd = nd < 0 ? p : intersect(p, nd);
      }
      if (nd >= 0 && c.idom[b] != nd) {
        c.idom[b] = nd;
        changed = true;
      }
    }
  }
  c.idom[0] = -1;
  // The dominator tree's intervals, iteratively (a function may have thousands of blocks).
  // Each block's children in the dominator tree, as one flat list in block order.
  std::vector<int32_t> kid_start(nb + 1, 0), kid_list;
  for (int32_t b = 1; b < nb; ++b)
    if (c.idom[b] >= 0) ++kid_start[c.idom[b] + 1];
  for (int32_t b = 0; b < nb; ++b) kid_start[b + 1] += kid_start[b];
  kid_list.resize(kid_start[nb]);
  {
    std::vector<int32_t> fill(kid_start.begin(), kid_start.end() - 1);
    for (int32_t b = 1; b < nb; ++b)
      if (c.idom[b] >= 0) kid_list[fill[c.idom[b]]++] = b;
  }
  c.dom_in.assign(nb, -1);
  c.dom_out.assign(nb, -1);
  int32_t clock = 0;
  std::vector<std::pair<int32_t, size_t>> walk = {{0, 0}};
  c.dom_in[0] = clock++;
  while (!walk.empty()) {
    auto& [b, k] = walk.back();
    if (k < static_cast<size_t>(kid_start[b + 1] - kid_start[b])) {
      int32_t s = kid_list[kid_start[b] + k++];
      c.dom_in[s] = clock++;
      walk.push_back({s, 0});
    } else {
      c.dom_out[b] = clock++;
      walk.pop_back();
    }
  }
}

struct Decoders {
  ZydisDecoder full, minimal;
  Decoders() {
    ZydisDecoderInit(&full, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecoderInit(&minimal, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecoderEnableMode(&minimal, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
  }
};

const Decoders& decoders() {
  static const Decoders d;
  return d;
}

// A branch's one operand: whether it decoded, whether it is an immediate, and the target
// it gives (nullopt: through a register or memory, or no address).
struct BranchOperand {
  bool decoded = false, immediate = false;
  std::optional<uint64_t> target;
};

// From the minimal decode's raw bytes when the branch has one operand that is a relative
// immediate or none (a register or memory): every branch of Go's code. Else from a full
// decode of its operands, as before the minimal mode. The two agree on every branch of caddy
// and of millions of random instructions (Disasm.MinimalDecodeAgreesWithTheFullOne).
BranchOperand branch_operand(const uint8_t* at, size_t len, const ZydisDecodedInstruction& in,
                             uint64_t pc) {
  BranchOperand b;
  if (in.operand_count_visible == 1 && in.raw.imm[0].size == 0) {
    b.decoded = true;
    return b;
  }
  if (in.operand_count_visible == 1 && in.raw.imm[0].is_relative && in.raw.imm[0].is_signed) {
    b.decoded = b.immediate = true;
    b.target = pc + in.length + static_cast<uint64_t>(in.raw.imm[0].value.s);
    return b;
  }
  ZydisDecodedInstruction full;
  ZydisDecoderContext ctx;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoders().full, &ctx, at, len, &full)) ||
      full.operand_count_visible < 1 ||
      !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&decoders().full, &ctx, &full, ops, 1)))
    return b;
  b.decoded = true;
  b.immediate = ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
  ZyanU64 t = 0;
  if (b.immediate && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&full, &ops[0], pc, &t))) b.target = t;
  return b;
}

}  // namespace

namespace {

// What decode_blocks needs of one instruction, from either decoder.
struct Flow {
  uint8_t len = 0;
  bool ret = false, call = false, jmp = false;
  bool cond = false, uncond = false;  // Zydis' COND_BR and UNCOND_BR (every JMP)
  bool stops = false;                 // INT3, INT n, UD2: nothing runs after it
  BranchOperand op;                   // for branches and JMPs
};

Flow quick_flow(const QuickInsn& q, uint64_t pc) {
  Flow f;
  f.len = q.len;
  switch (q.flow) {
    case QuickInsn::kPlain:
      break;
    case QuickInsn::kRet:
      f.ret = f.stops = true;
      break;
    case QuickInsn::kCall:
      f.call = true;
      break;
    case QuickInsn::kJmp:
    case QuickInsn::kJcc:
      f.jmp = q.flow == QuickInsn::kJmp;
      f.uncond = f.jmp;
      f.cond = !f.jmp;
      f.op.decoded = f.op.immediate = true;
      f.op.target = pc + q.len + static_cast<uint64_t>(static_cast<int64_t>(q.rel));
      break;
    case QuickInsn::kJmpIndirect:
      f.jmp = f.uncond = true;
      f.op.decoded = true;
      break;
    case QuickInsn::kInt3:
    case QuickInsn::kUd2:
      f.stops = true;
      break;
  }
  return f;
}

bool zydis_flow(const uint8_t* at, size_t len, uint64_t pc, Flow& f) {
  ZydisDecodedInstruction in;
  ZydisDecoderContext ctx;
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoders().minimal, &ctx, at, len, &in)))
    return false;
  f.len = in.length;
  f.ret = in.mnemonic == ZYDIS_MNEMONIC_RET;
  f.call = in.meta.category == ZYDIS_CATEGORY_CALL;
  f.jmp = in.mnemonic == ZYDIS_MNEMONIC_JMP;
  f.cond = in.meta.category == ZYDIS_CATEGORY_COND_BR;
  f.uncond = in.meta.category == ZYDIS_CATEGORY_UNCOND_BR;
  f.stops = in.meta.category == ZYDIS_CATEGORY_RET ||
            in.meta.category == ZYDIS_CATEGORY_INTERRUPT || in.mnemonic == ZYDIS_MNEMONIC_UD2;
  if (f.cond || f.uncond || f.jmp) f.op = branch_operand(at, len, in, pc);
  return true;
}

}  // namespace

CodeBlocks decode_blocks(Bytes code, uint64_t entry, bool dominators) {
  // Most instructions are decoded by quick_decode's tables; the rest by Zydis in its minimal
  // mode (length, mnemonic and category, no operands, which only branches need). Decoding
  // was a quarter of a cold whole-binary plan with Zydis alone.
  CodeBlocks out;
  out.insns.reserve(code.size() / 4 + 8);  // Go's instructions average about 4 bytes
  std::vector<uint64_t> targets;
  bool next_leads = true, after_call = false;
  size_t off = 0;
  while (off < code.size()) {
    const uint8_t* at = code.data() + off;
    const size_t left = code.size() - off;
    const uint64_t pc = entry + off;
    Flow f;
    QuickInsn q;
    if (quick_decode(at, left, q)) {
      f = quick_flow(q, pc);
    } else if (!zydis_flow(at, left, pc, f)) {
      out.error_at = pc;
      return out;  // incomplete: callers trust nothing about blocks then
    }
    CodeInsn ci;
    ci.pc = pc;
    ci.len = f.len;
    ci.leader = next_leads;
    // A NOP right after a CALL is the one Go puts after calls that never return (so their
    // return address stays in the function), not an inline mark.
    ci.nop1 = f.len == 1 && *at == 0x90 && !after_call;
    after_call = f.call;
    if (f.ret) ci.flags |= CodeInsn::kRet;
    next_leads = false;
    const bool branch = f.cond || f.uncond;
    if (branch || f.jmp) {
      const bool direct = f.op.target.has_value();
      const uint64_t t = f.op.target.value_or(0);
      if (f.jmp && direct) ci.flags |= CodeInsn::kJmpDirect;
      if (f.jmp && f.op.decoded && !f.op.immediate) ci.flags |= CodeInsn::kJmpIndirect;
      if (branch) {
        next_leads = true;
        if (direct) {
          targets.push_back(t);
        } else {
          out.indirect = true;
        }
        if (f.uncond) ci.falls_through = false;
      }
      if (direct) ci.target = t;  // Zydis puts every JMP in UNCOND_BR
    }
    if (f.stops) {
      next_leads = true;
      ci.falls_through = false;
    }
    out.insns.push_back(ci);
    off += f.len;
  }
  // Each instruction's index by its offset: the chooser and the dominators ask for
  // instructions by pc many times each (a binary search was 4% of a whole binary's plan).
  out.at_offset.assign(code.size(), -1);
  for (size_t k = 0; k < out.insns.size(); ++k)
    out.at_offset[out.insns[k].pc - entry] = static_cast<int32_t>(k);
  for (uint64_t t : targets) {
    int64_t k = out.index_of(t);
    if (k >= 0) out.insns[k].leader = true;
  }
  out.complete = true;
  if (dominators) build_dominators(out);
  return out;
}

void index_inline_facts(
    InlineFacts& facts, const CodeBlocks& code, const std::function<int32_t(int32_t)>& parent,
    const std::function<std::optional<std::pair<std::string_view, int32_t>>(uint64_t)>& line_at) {
  const size_t n = code.insns.size();
  facts.indexed = false;
  facts.within_start.clear();
  facts.within_insns.clear();
  facts.at_line.clear();
  facts.insn_line.assign(n, -1);
  // Node indices count an inline tree's nodes: a larger one is corrupt, and the chooser then
  // asks plainly.
  constexpr int32_t kMaxNode = 1 << 20;
  // Each instruction's chain, as `within` walks it: at most 64 nodes up.
  auto chain = [&](int32_t idx, auto&& visit) {
    for (int depth = 0; idx >= 0 && depth < 64; ++depth) {
      if (idx >= kMaxNode) return false;
      visit(idx);
      idx = parent(idx);
    }
    return true;
  };
  std::vector<int32_t> count;
  for (size_t j = 0; j < n; ++j) {
    bool ok = chain(facts.insn_node[j], [&](int32_t idx) {
      if (static_cast<size_t>(idx) >= count.size()) count.resize(idx + 1, 0);
      ++count[idx];
    });
    if (!ok) return;
  }
  facts.within_start.assign(count.size() + 1, 0);
  for (size_t k = 0; k < count.size(); ++k)
    facts.within_start[k + 1] = facts.within_start[k] + count[k];
  facts.within_insns.resize(facts.within_start.back());
  std::vector<int32_t> fill(facts.within_start.begin(), facts.within_start.end() - 1);
  // The function's files, by their bytes: few, and one view of the pclntab each almost always.
  std::vector<std::string_view> files;
  for (size_t j = 0; j < n; ++j) {
    const int32_t at = facts.insn_node[j];
    chain(at, [&](int32_t idx) { facts.within_insns[fill[idx]++] = static_cast<int32_t>(j); });
    if (auto fl = line_at(code.insns[j].pc)) {
      size_t f = 0;
      while (f < files.size() &&
             !(files[f].data() == fl->first.data() && files[f].size() == fl->first.size()) &&
             files[f] != fl->first)
        ++f;
      if (f == files.size()) files.push_back(fl->first);
      const int64_t key = static_cast<int64_t>(f) << 32 | static_cast<uint32_t>(fl->second);
      facts.insn_line[j] = key;
      facts.at_line.push_back({at, key, static_cast<int32_t>(j)});
    }
  }
  // Each instruction was added in order: by node and line, stably, is by all three (and an
  // inlined comparison costs less than the defaulted three-way one, 5% of a plan).
  std::stable_sort(facts.at_line.begin(), facts.at_line.end(),
                   [](const InlineFacts::AtLine& a, const InlineFacts::AtLine& b) {
                     return a.node != b.node ? a.node < b.node : a.line < b.line;
                   });
  facts.indexed = true;
}

InlineMarkChoice choose_inline_site(const CodeBlocks& code, const InlineFacts& facts, int32_t node,
                                    uint64_t mark) {
  InlineMarkChoice c;
  const int64_t i = code.index_of(mark);
  if (i < 0) {
    c.reason = "its call-site mark is not an instruction of the function";
    return c;
  }
  // Go's compiler emits one NOP per inlined call in the call's own basic block, and keeps it
  // there (it carries a memory argument, so no pass moves it); it stays a NOP only when no
  // other instruction of the call's line could stand in for it.
  if (code.insns[i].nop1) {
    c.ok = true;
    c.pc = mark;
    return c;
  }
  // Otherwise the compiler reused the first instruction, in layout order, of the call's
  // line and frame, which may be in another block than the call: scheduled ahead of a
  // branch, or at the end of a condition inside the body. The mark's block B is taken only
  // when it is where the body starts: B holds some of the body, every other instruction of
  // the body and of the call's line is in a block B dominates (so each call passes B), the
  // body's code outside B is reached through a branch of the body's own that ends B (so B
  // is not ahead of the caller's branch that guards the call), and B is not a loop header
  // (so it runs once per call).
  if (!code.complete || code.indirect) {
    c.reason =
        "its call-site mark is an instruction of the caller, and the function's jump "
        "targets are not all known";
    return c;
  }
  const int32_t B = code.block_of[i];
  const int32_t frame = facts.node_at(mark);
  const int64_t n = static_cast<int64_t>(code.insns.size());
  bool body_here = false, body_elsewhere = false;
  if (facts.indexed) {
    // The loop below, on the instructions it can fail or learn on only: the body's, and the
    // caller's own on the call's line. The first failure in layout order wins, as there.
    int64_t body_fail = n, line_fail = n;
    if (node >= 0 && static_cast<size_t>(node) + 1 < facts.within_start.size()) {
      for (int32_t k = facts.within_start[node]; k < facts.within_start[node + 1]; ++k) {
        const int32_t j = facts.within_insns[k];
        const int32_t blk = code.block_of[j];
        if (blk == B) {
          body_here = true;
        } else if (code.dominates(B, blk)) {
          body_elsewhere = true;
        } else {
          body_fail = j;
          break;
        }
      }
    }
    const int64_t line = facts.insn_line[i];
    if (line >= 0 && !facts.within(frame, node)) {
      using AtLine = InlineFacts::AtLine;
      auto l =
          std::lower_bound(facts.at_line.begin(), facts.at_line.end(), AtLine{frame, line, -1});
      for (; l != facts.at_line.end() && l->node == frame && l->line == line; ++l) {
        const int32_t blk = code.block_of[l->insn];
        if (blk != B && !code.dominates(B, blk)) {
          line_fail = l->insn;
          break;
        }
      }
    }
    if (body_fail < line_fail) {
      c.reason = "part of its inlined body is not dominated by its call-site mark's block";
      return c;
    }
    if (line_fail < n) {
      c.reason = "the call's line has code that its call-site mark's block does not dominate";
      return c;
    }
  }
  for (int64_t j = 0; j < (facts.indexed ? 0 : n); ++j) {
    const uint64_t pc = code.insns[j].pc;
    const int32_t blk = code.block_of[j];
    const int32_t at = facts.insn_node.empty() ? facts.node_at(pc) : facts.insn_node[j];
    if (facts.within(at, node)) {
      if (blk == B) {
        body_here = true;
      } else if (code.dominates(B, blk)) {
        body_elsewhere = true;
      } else {
        c.reason = "part of its inlined body is not dominated by its call-site mark's block";
        return c;
      }
    } else if (blk != B && at == frame && !code.dominates(B, blk) && facts.same_line(pc, mark)) {
      c.reason = "the call's line has code that its call-site mark's block does not dominate";
      return c;
    }
  }
  if (!body_here) {
    c.reason = "no instruction of the inlined body is in its call-site mark's basic block";
    return c;
  }
  const int64_t last =
      (B + 1 < static_cast<int32_t>(code.block_start.size()) ? code.block_start[B + 1] : n) - 1;
  if (body_elsewhere && !facts.within(facts.node_at(code.insns[last].pc), node)) {
    c.reason = "its call-site mark's block ends in the caller's code, ahead of the body";
    return c;
  }
  for (int32_t p : code.preds(B)) {
    if (code.dominates(B, p)) {
      c.reason = "its call-site mark's block is a loop header";
      return c;
    }
  }
  c.ok = true;
  c.pc = mark;
  return c;
}

}  // namespace gotap
