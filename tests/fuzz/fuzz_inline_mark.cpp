// libFuzzer target: the basic blocks, dominators and inline-site choice of a function's code
// (the code bytes of a traced binary are as untrusted as its pclntab). The first bytes pick
// the mark and the node, the rest is the code; each instruction's inline node and line are
// drawn from the code bytes themselves, so every shape of attribution is reached.
#include <cstddef>
#include <cstdint>

#include "core/plan/inline_mark.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint64_t entry = 0x401000;
  const uint8_t mark_off = data[0], node_pick = data[1] % 4;
  gotap::Bytes code{data + 2, size - 2};
  gotap::CodeBlocks blocks = gotap::decode_blocks(code, entry);
  auto byte_at = [&](uint64_t pc) -> uint8_t {
    return pc >= entry && pc - entry < code.size() ? code[pc - entry] : 0;
  };
  gotap::InlineFacts facts;
  facts.node_at = [&](uint64_t pc) { return static_cast<int32_t>(byte_at(pc) % 5) - 1; };
  // Node k's parent is k-1; the outer function's own code is -1.
  facts.within = [](int32_t idx, int32_t want) { return idx >= want && want >= 0; };
  facts.same_line = [&](uint64_t a, uint64_t b) { return (byte_at(a) >> 4) == (byte_at(b) >> 4); };
  auto c = gotap::choose_inline_site(blocks, facts, node_pick, entry + mark_off);
  // The indexed chooser (index_inline_facts) must answer exactly as the plain one.
  if (blocks.complete && !blocks.indirect) {
    gotap::InlineFacts indexed = facts;
    for (const auto& in : blocks.insns) indexed.insn_node.push_back(facts.node_at(in.pc));
    gotap::index_inline_facts(
        indexed, blocks, [](int32_t k) { return k - 1; },
        [&](uint64_t pc) {
          return std::optional<std::pair<std::string_view, int32_t>>(
              std::pair<std::string_view, int32_t>("f.go", byte_at(pc) >> 4));
        });
    auto d = gotap::choose_inline_site(blocks, indexed, node_pick, entry + mark_off);
    if (d.ok != c.ok || d.pc != c.pc || d.reason != c.reason) __builtin_trap();
  }
  for (size_t b = 0; b < blocks.idom.size(); ++b)
    (void)blocks.dominates(static_cast<int32_t>(b % 7), static_cast<int32_t>(b));
  volatile bool sink = c.ok && c.pc == entry + mark_off;
  (void)sink;
  return 0;
}
