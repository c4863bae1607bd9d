// The block structure the inline-site chooser relies on (core/plan/inline_mark.h): the
// dominator relation answered from the dominator tree's intervals must be the one walking up
// the immediate dominators gives, on every function of real Go code.
#include <cstdint>
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

}  // namespace
}  // namespace gotap::testing
