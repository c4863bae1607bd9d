// The block structure the inline-site chooser relies on (core/plan/inline_mark.h): the
// dominator relation answered from the dominator tree's intervals must be the one walking up
// the immediate dominators gives, on every function of real Go code.
#include <cstdint>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "core/plan/go_binary.h"
#include "core/plan/inline_mark.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// The definition: b reachable, and a on b's chain of immediate dominators.
bool dominates_by_walk(const CodeBlocks& c, int32_t a, int32_t b) {
  if (b < 0 || b >= static_cast<int32_t>(c.idom.size())) return false;
  if (b != 0 && c.idom[b] < 0) return false;
  for (size_t guard = 0; guard <= c.idom.size(); ++guard) {
    if (a == b) return true;
    if (b == 0) return false;
    b = c.idom[b];
  }
  return false;
}

TEST(InlineMark, DominatorIntervalsAgreeWithTheIdomWalk) {
  size_t checked = 0;
  for (const Fixture& fx : all_fixtures("inlined")) {
    if (fx.flavour != "default") continue;
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    const BinaryView v = (*bin)->view();
    for (const auto& f : v.pclntab->all_funcs()) {
      if (f.end <= f.entry) continue;
      CodeBlocks c = decode_blocks(v.elf->read(f.entry, f.end - f.entry), f.entry);
      if (!c.complete) continue;
      const auto nb = static_cast<int32_t>(c.idom.size());
      if (nb > 300) continue;  // quadratic below: the many small functions are enough
      for (int32_t a = -1; a <= nb; ++a)
        for (int32_t b = -1; b <= nb; ++b)
          ASSERT_EQ(c.dominates(a, b), dominates_by_walk(c, a, b))
              << f.name << " blocks " << a << ", " << b;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "fixture 'inlined' not built in " << fixtures_dir();
}

// The indexed chooser (index_inline_facts) answers as the plain one, on code of every shape:
// random bytes, each instruction's node and line drawn from its own first byte (as
// fuzz_inline_mark does), every mark and node.
TEST(InlineMark, IndexedChooserAnswersAsThePlainOne) {
  std::mt19937 rng(22);
  const uint64_t entry = 0x401000;
  size_t compared = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> bytes(8 + rng() % 120);
    for (auto& b : bytes) {
      // Mostly short branches, NOPs, RETs and one-byte instructions, so blocks form.
      static const uint8_t kPick[] = {0x90, 0x90, 0xc3, 0x74, 0x75, 0xeb, 0x50, 0x58, 0x40};
      b = rng() % 3 ? kPick[rng() % sizeof kPick] : static_cast<uint8_t>(rng());
    }
    Bytes code(bytes.data(), bytes.size());
    CodeBlocks blocks = decode_blocks(code, entry);
    if (!blocks.complete || blocks.indirect) continue;
    auto byte_at = [&](uint64_t pc) -> uint8_t {
      return pc >= entry && pc - entry < bytes.size() ? bytes[pc - entry] : 0;
    };
    InlineFacts plain;
    plain.node_at = [&](uint64_t pc) { return static_cast<int32_t>(byte_at(pc) % 5) - 1; };
    plain.within = [](int32_t idx, int32_t want) { return idx >= want && want >= 0; };
    plain.same_line = [&](uint64_t a, uint64_t b) {
      return (byte_at(a) >> 5) == (byte_at(b) >> 5);
    };
    InlineFacts indexed = plain;
    for (const auto& in : blocks.insns) indexed.insn_node.push_back(plain.node_at(in.pc));
    index_inline_facts(
        indexed, blocks, [](int32_t k) { return k - 1; },
        [&](uint64_t pc) {
          return std::optional<std::pair<std::string_view, int32_t>>(
              std::pair<std::string_view, int32_t>("f.go", byte_at(pc) >> 5));
        });
    ASSERT_TRUE(indexed.indexed);
    for (const auto& in : blocks.insns)
      for (int32_t node = -1; node < 4; ++node) {
        auto a = choose_inline_site(blocks, plain, node, in.pc);
        auto b = choose_inline_site(blocks, indexed, node, in.pc);
        ASSERT_EQ(a.ok, b.ok) << round << " " << node;
        ASSERT_EQ(a.pc, b.pc);
        ASSERT_EQ(a.reason, b.reason) << round << " " << node;
        ++compared;
      }
  }
  EXPECT_GT(compared, 10000u);
}

// A mark whose block is a loop header runs once per iteration, not once per call: the chooser
// must refuse it. Hand-built code, the body of inline node 0 starting at the mark (not a NOP,
// so the block rules apply) in block B, a back edge from a block B dominates:
//
//   0x00 mov rbx, rax   caller          block 0
//   0x03 inc rax        node 0 (mark)   block B: a jump target
//   0x06 cmp rax, rbx   caller
//   0x09 je  0x10
//   0x0b inc rbx        caller          block C
//   0x0e jmp 0x03 (the back edge) or jmp 0x10 (none)
//   0x10 ret
TEST(InlineMark, RefusesAMarkInALoopHeader) {
  const uint64_t entry = 0x401000;
  auto code_with = [](uint8_t jmp_rel) {
    return std::vector<uint8_t>{0x48, 0x89, 0xc3, 0x48, 0xff, 0xc0, 0x48,    0x39, 0xd8,
                                0x74, 0x05, 0x48, 0xff, 0xc3, 0xeb, jmp_rel, 0xc3};
  };
  for (bool back_edge : {true, false}) {
    SCOPED_TRACE(back_edge ? "back edge into the mark's block" : "no back edge");
    const std::vector<uint8_t> bytes = code_with(back_edge ? 0xf3 : 0x00);
    CodeBlocks blocks = decode_blocks(Bytes(bytes.data(), bytes.size()), entry);
    ASSERT_TRUE(blocks.complete);
    ASSERT_FALSE(blocks.indirect);
    ASSERT_EQ(blocks.insns.size(), 7u);
    // Without the back edge 0x03 is no jump target, and B is the entry block.
    ASSERT_EQ(blocks.block_start.size(), back_edge ? 4u : 3u);
    const int32_t B = blocks.block_of[1], C = blocks.block_of[4];
    EXPECT_EQ(blocks.block_start[B], back_edge ? 1 : 0);
    EXPECT_TRUE(blocks.dominates(B, C));
    EXPECT_EQ(blocks.preds(B).size(), back_edge ? 2u : 0u);
    const uint64_t mark = entry + 0x03;
    InlineFacts plain;
    plain.node_at = [&](uint64_t pc) { return pc == mark ? 0 : -1; };
    plain.within = [](int32_t idx, int32_t want) { return want >= 0 && idx == want; };
    plain.same_line = [](uint64_t a, uint64_t b) { return a == b; };
    InlineFacts indexed = plain;
    for (const auto& in : blocks.insns) indexed.insn_node.push_back(plain.node_at(in.pc));
    index_inline_facts(
        indexed, blocks, [](int32_t) { return -1; },
        [&](uint64_t pc) {
          return std::optional<std::pair<std::string_view, int32_t>>(
              std::pair<std::string_view, int32_t>("f.go", pc == mark ? 7 : 3));
        });
    ASSERT_TRUE(indexed.indexed);
    for (const InlineFacts* facts : {&plain, &indexed}) {
      const auto c = choose_inline_site(blocks, *facts, 0, mark);
      if (back_edge) {
        EXPECT_FALSE(c.ok) << "a probe at the loop header fires once per iteration";
        EXPECT_EQ(c.reason, std::string_view("its call-site mark's block is a loop header"));
      } else {
        EXPECT_TRUE(c.ok) << c.reason;
        EXPECT_EQ(c.pc, mark);
      }
    }
  }
}

}  // namespace
}  // namespace gotap::testing
