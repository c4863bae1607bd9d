// `funcs --json` writes each function's line directly (core/plan/plan_json.h): the bytes must
// be those of to_json(f).dump() as before, on every fixture's whole plan and on strings that
// need escaping or replacement.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/plan/go_binary.h"
#include "core/plan/plan.h"
#include "core/plan/plan_json.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

std::string via_tree(const FuncPlan& f) {
  return to_json(f).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string direct(const FuncPlan& f) {
  std::string out;
  append_json_line(out, f);
  return out;
}

TEST(PlanJson, SameBytesAsTheTreeOnFixtures) {
  size_t checked = 0;
  for (const auto& fx : testing::all_fixtures()) {
    // Inline sites (DWARF) and method-table signatures (stripped): every field's kind of
    // value, in every release's layout.
    if (!(fx.program == "inlined" && fx.flavour == "default") &&
        !(fx.program == "methods" && fx.flavour == "pie-stripped"))
      continue;
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << fx.label() << ": " << bin.error().what();
    auto plan = (*bin)->plan({"*"}, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << fx.label() << ": " << plan.error().what();
    for (const auto& f : plan->funcs) ASSERT_EQ(direct(f), via_tree(f)) << fx.label();
    ++checked;
  }
  EXPECT_GT(checked, 0u) << "no fixtures in " << testing::fixtures_dir();
}

TEST(PlanJson, EscapesAndReplacesAsTheTree) {
  FuncPlan f;
  f.name = "main.\"q\"\\x\x01\x1f\x7f\t\n";
  f.file = "caf\xc3\xa9.go";           // valid UTF-8
  f.entry_probe_kind = "bad\xff\xfe";  // invalid bytes
  f.abi = "trunc\xe2\x82";             // truncated sequence at the end
  f.args_source = "mid\xe2x\xc3";
  f.line = -3;
  f.frame_size = -8;
  f.entry = 0x401000;
  f.end = 0x401100;
  f.entry_probe = 0x401004;
  f.entry_refires = true;
  f.ret_sites = {0x4010f0, 0x4010ff};
  f.tail_jumps = {0x4010a0};
  ParamLoc p;
  p.name = "\xed\xa0\x80surrogate";
  p.type_name = "[]string";
  p.size = 24;
  f.args.push_back(p);
  f.results.push_back(p);
  InlineSite s;
  s.outer = "main.outer";
  s.pc = 0x401010;
  s.file = "/x/\"y\".go";
  s.line = 7;
  f.inline_sites.push_back(s);
  s.skip_reason = "why \xf0\x9f\x98\x80";
  f.inline_skipped.push_back(s);
  f.inline_probed = false;
  EXPECT_EQ(direct(f), via_tree(f));
  // An inlined-only function: null addresses and the extra keys.
  FuncPlan g;
  g.name = "main.inl";
  g.inline_sites.push_back(s);
  EXPECT_EQ(direct(g), via_tree(g));
  EXPECT_EQ(direct(FuncPlan{}), via_tree(FuncPlan{}));
}

}  // namespace
}  // namespace gotap
