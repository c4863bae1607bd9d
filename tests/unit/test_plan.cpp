// GoBinary::plan on the Go fixtures: functions, entries and ends against debug/gosym, entry
// probe sites, pattern errors, and the inline sites of a function inlined into several callers.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/plan/go_binary.h"
#include "core/plan/plan.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using testing::all_fixtures;
using testing::file_exists;
using testing::Fixture;
using testing::read_file;

struct RefFunc {
  uint64_t entry = 0, end = 0;
  bool wrapper = false;
};

// The functions of the debug/gosym reference, by name. funcID "wrapper" covers both ABI
// wrappers (an alias with the same name as the real function: not a function of its own) and
// the closures the compiler makes for `go`/`defer` statements (real, traceable functions).
std::multimap<std::string, RefFunc> gosym_funcs(const Fixture& fx) {
  std::multimap<std::string, RefFunc> all, out;
  auto j = nlohmann::json::parse(read_file(fx.path + ".gosym.json"));
  for (const auto& f : j["funcs"]) {
    all.emplace(
        f["name"].get<std::string>(),
        RefFunc{std::stoull(f["entry"].get<std::string>(), nullptr, 16),
                std::stoull(f["end"].get<std::string>(), nullptr, 16), f.value("wrapper", false)});
  }
  for (const auto& [name, r] : all) {
    bool has_real = false;
    auto [lo, hi] = all.equal_range(name);
    for (auto it = lo; it != hi; ++it) has_real |= !it->second.wrapper;
    if (!r.wrapper || !has_real) out.emplace(name, r);
  }
  return out;
}

bool at_least_121(const Fixture& fx) {
  int major = 0, minor = 0;
  std::sscanf(fx.go_version.c_str(), "%d.%d", &major, &minor);
  return major > 1 || minor >= 21;
}

TEST(Plan, MainFunctionsMatchGosym) {
  int checked = 0;
  for (const auto& fx : all_fixtures()) {
    if (!file_exists(fx.path + ".gosym.json") || fx.program == "inlined") continue;
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    auto ref = gosym_funcs(fx);
    std::set<std::string> want;
    for (const auto& [name, r] : ref)
      if (name.rfind("main.", 0) == 0) want.insert(name);
    if (want.empty()) continue;  // e.g. a real-world binary whose main is elsewhere
    auto plan = (*bin)->plan({"main.*"}, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.error().what();
    EXPECT_GT(plan->probe_count(), 0u);
    std::set<std::string> got;
    const auto& elf = (*bin)->elf();
    for (const auto& f : plan->funcs) {
      SCOPED_TRACE(f.name);
      if (!f.entry) {
        EXPECT_EQ(ref.count(f.name), 0u) << "inlined-only, yet gosym has it";
        EXPECT_FALSE(f.inline_sites.empty() && f.inline_skipped.empty());
        continue;
      }
      got.insert(f.name);
      auto [lo, hi] = ref.equal_range(f.name);
      bool found = false;
      for (auto it = lo; it != hi; ++it)
        if (it->second.entry == f.entry && it->second.end == f.end) found = true;
      EXPECT_TRUE(found) << std::hex << f.entry << "-" << f.end;

      ASSERT_GE(f.entry_probe, f.entry);
      ASSERT_LT(f.entry_probe, f.end);
      auto b = elf.read(f.entry_probe, 2);
      ASSERT_EQ(b.size(), 2u);
      if (f.entry_probe_kind == "push_rbp") {
        EXPECT_EQ(b[0], 0x55);
        EXPECT_FALSE(f.entry_refires);
      } else if (f.entry_probe_kind == "jcc") {
        EXPECT_TRUE(b[0] == 0x76 || (b[0] == 0x0f && b[1] == 0x86));
        EXPECT_TRUE(f.entry_refires);
        // Go 1.21+ compilers always follow the stack check with `push rbp`.
        EXPECT_FALSE(at_least_121(fx) && f.abi == "internal");
      } else {
        EXPECT_EQ(f.entry_probe_kind, "entry");
        EXPECT_EQ(f.entry_probe, f.entry);
      }
      EXPECT_EQ(f.frame_size, 0);  // every entry probe is before the frame is allocated
      // The stack check's slow path calls runtime.morestack*; a jcc entry probe has one.
      if (f.entry_probe_kind == "jcc") {
        EXPECT_NE(f.morestack_call, 0u) << f.name;
      }
      if (f.morestack_call) {
        auto c = elf.read(f.morestack_call, 5);
        ASSERT_EQ(c.size(), 5u);
        ASSERT_EQ(c[0], 0xe8) << f.name;  // CALL rel32
        int32_t rel;
        std::memcpy(&rel, c.data() + 1, 4);
        const PclnFunc* callee = (*bin)->pclntab().find(f.morestack_call + 5 + int64_t(rel));
        ASSERT_NE(callee, nullptr) << f.name;
        EXPECT_TRUE(callee->name.starts_with("runtime.morestack"))
            << f.name << " calls " << callee->name;
        EXPECT_TRUE(f.morestack_call > f.entry && f.morestack_call < f.end);
      }
      for (uint64_t r : f.ret_sites) {
        auto rb = elf.read(r, 1);
        ASSERT_EQ(rb.size(), 1u);
        EXPECT_TRUE(rb[0] == 0xc3 || rb[0] == 0xc2) << std::hex << r;
        EXPECT_TRUE(r >= f.entry && r < f.end);
        // pcsp is 0 at every RET: the return address is at [RSP].
        EXPECT_EQ((*bin)->pclntab().sp_delta(*(*bin)->pclntab().find(r), r), 0);
      }
      // A tail jump leaves with the frame torn down too: backends probe it as a return.
      for (uint64_t t : f.tail_jumps)
        EXPECT_EQ((*bin)->pclntab().sp_delta(*(*bin)->pclntab().find(t), t), 0) << f.name;
      EXPECT_FALSE(f.ret_sites.empty() && f.tail_jumps.empty() && f.name != "main.main")
          << "no way out of " << f.name;
      EXPECT_EQ(f.abi, "internal");  // fixtures are Go >= 1.17 and main.* is not assembly
      EXPECT_NE(f.args_source, "");
      if ((*bin)->dwarf()) {
        EXPECT_EQ(f.args_source, "dwarf");
      }
      // The JSON form carries docs/json.md's fields.
      auto j = to_json(f);
      for (const char* k :
           {"event", "func", "entry", "end", "entry_probe", "ret_sites", "args", "results"})
        EXPECT_TRUE(j.contains(k)) << k;
      EXPECT_EQ(j["entry"], hex(f.entry));
    }
    EXPECT_EQ(got, want);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no Go fixtures built in " << testing::fixtures_dir();
}

TEST(Plan, PatternErrors) {
  auto fixtures = all_fixtures("basic");
  if (fixtures.empty()) GTEST_SKIP() << "no basic fixture built in " << testing::fixtures_dir();
  auto bin = GoBinary::open(fixtures.front().path);
  ASSERT_TRUE(bin.ok()) << bin.error().what();
  for (const char* pat : {"main.noSuchFunction", "nosuch.*", "re:^nosuch"}) {
    auto plan = (*bin)->plan({"main.*", pat}, PlanOptions{});
    ASSERT_FALSE(plan.ok()) << pat;
    EXPECT_EQ(plan.error().kind, ErrorKind::BadInput);
    EXPECT_NE(plan.error().message.find(std::string("'") + pat + "'"), std::string::npos)
        << plan.error().message;
  }
  auto bad = (*bin)->plan({"re:("}, PlanOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::BadInput);

  // An exact name matches that function alone; duplicates across patterns are planned once.
  auto one = (*bin)->plan({"main.main", "main.mai?"}, PlanOptions{});
  ASSERT_TRUE(one.ok()) << one.error().what();
  ASSERT_EQ(one->funcs.size(), 1u);
  EXPECT_EQ(one->funcs[0].name, "main.main");
  // Output is sorted by name.
  auto all = (*bin)->plan({"main.*"}, PlanOptions{});
  ASSERT_TRUE(all.ok());
  for (size_t i = 1; i < all->funcs.size(); ++i)
    EXPECT_LE(all->funcs[i - 1].name, all->funcs[i].name);
}

// Lines [first, last] of `func NAME(` ... `}` in a Go source file (the fixture's own source,
// the ground truth for which lines belong to an inlined body).
std::pair<int, int> func_lines(const std::string& src, const std::string& name) {
  std::istringstream in(src);
  std::string line;
  int n = 0, first = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!first && line.rfind("func " + name + "(", 0) == 0) first = n;
    if (first && line == "}") return {first, n};
  }
  return {0, 0};
}

// objdump line numbers by PC: `main.go:12  0x49e141 ...`.
std::map<uint64_t, int> objdump_lines(const std::string& text) {
  std::map<uint64_t, int> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find("main.go:");
    auto ox = line.find("0x");
    if (colon == std::string::npos || ox == std::string::npos || line[0] != ' ') continue;
    out[std::stoull(line.substr(ox), nullptr, 16)] = std::atoi(line.c_str() + colon + 8);
  }
  return out;
}

// The BinaryView a plan carries for the backends: its pc lookups see inlined calls as frames
// of their own, innermost first, out to the function the code is in.
TEST(Plan, BinaryViewFramesAtInlineSites) {
  auto fixtures = all_fixtures("inlined");
  if (fixtures.empty())
    GTEST_SKIP() << "fixture 'inlined' not built in " << testing::fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    auto plan = (*bin)->plan({"main.twice"}, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.error().what();
    const BinaryView& view = plan->binary_view;
    ASSERT_NE(view.elf, nullptr);
    EXPECT_EQ(view.path(), fx.path);
    // Only a PIE's bias depends on the process (here none).
    EXPECT_EQ(view.load_bias(-1), view.elf->is_pie() ? std::nullopt : std::optional<uint64_t>(0));
    ASSERT_EQ(plan->funcs.size(), 1u);
    // Sites are call-site marks: instructions of the caller (or of the inlined call's own
    // inlined parent), so the frames there end at the outer function and never name twice.
    std::vector<InlineSite> all = plan->funcs[0].inline_sites;
    all.insert(all.end(), plan->funcs[0].inline_skipped.begin(),
               plan->funcs[0].inline_skipped.end());
    ASSERT_FALSE(all.empty());
    // The sites' strings are views into the binary's bytes, not copies (core/plan/plan.h).
    const Bytes image = view.elf->bytes();
    auto in_image = [&](std::string_view v) {
      const auto* p = reinterpret_cast<const uint8_t*>(v.data());
      return p >= image.data() && p + v.size() <= image.data() + image.size();
    };
    for (const auto& s : all) {
      EXPECT_TRUE(in_image(s.outer));
      EXPECT_TRUE(in_image(s.file));
      EXPECT_EQ(view.func_name(s.pc), s.outer);
      auto frames = view.frames_at(s.pc, 16);
      ASSERT_GE(frames.size(), 1u);
      for (size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(frames[i].inlined, i + 1 < frames.size());
        EXPECT_NE(frames[i].func, "main.twice");
      }
      EXPECT_EQ(frames.back().func, s.outer);
      EXPECT_FALSE(frames.back().inlined);
      EXPECT_EQ(frames.back().file.substr(frames.back().file.rfind('/') + 1), "main.go");
      EXPECT_EQ(view.frames_at(s.pc, 1).size(), 1u);
    }
    EXPECT_TRUE(view.frames_at(0, 16).empty());
    EXPECT_EQ(view.func_name(0), "");
  }
}

// Sites that cannot be probed exactly are listed per function and summed up in one warning.
TEST(Plan, SkippedInlineSitesWarnOnce) {
  auto fixtures = all_fixtures("inlbranch");
  if (fixtures.empty())
    GTEST_SKIP() << "fixture 'inlbranch' not built in " << testing::fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    auto plan = (*bin)->plan({"main.*"}, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.error().what();
    size_t funcs = 0, sites = 0;
    for (const auto& f : plan->funcs) {
      funcs += !f.inline_skipped.empty();
      sites += f.inline_skipped.size();
    }
    // outerStep in nested's loop is skipped by every release in the matrix.
    ASSERT_GT(funcs, 1u);
    size_t lines = 0;
    for (const auto& w : plan->warnings) {
      if (w.find("no instruction that runs exactly once per call") == std::string::npos) continue;
      ++lines;
      EXPECT_EQ(w.rfind(std::to_string(funcs) + " functions were inlined at " +
                            std::to_string(sites) + " call site(s)",
                        0),
                0u)
          << w;
    }
    EXPECT_EQ(lines, 1u);
  }
}

TEST(Plan, InlineSites) {
  auto fixtures = all_fixtures("inlined");
  if (fixtures.empty())
    GTEST_SKIP() << "fixture 'inlined' not built in " << testing::fixtures_dir();
  const std::string src =
      read_file(std::string(GOTAP_SOURCE_DIR) + "/tests/fixtures/inlined/main.go");
  auto clamp_lines = func_lines(src, "clamp");
  auto twice_lines = func_lines(src, "twice");
  ASSERT_GT(clamp_lines.first, 0);
  ASSERT_GT(twice_lines.first, 0);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    const Pclntab& pc = (*bin)->pclntab();
    auto ref = gosym_funcs(fx);
    std::map<uint64_t, int> lines;
    if (file_exists(fx.path + ".objdump")) lines = objdump_lines(read_file(fx.path + ".objdump"));

    auto plan = (*bin)->plan({"main.clamp", "main.twice"}, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.error().what();
    ASSERT_EQ(plan->funcs.size(), 2u);
    const FuncPlan& clamp = plan->funcs[0];
    const FuncPlan& twice = plan->funcs[1];
    ASSERT_EQ(clamp.name, "main.clamp");
    ASSERT_EQ(twice.name, "main.twice");
    // clamp is also called through a func value, so it has an out-of-line copy; twice has none.
    EXPECT_NE(clamp.entry, 0u);
    EXPECT_EQ(ref.count("main.clamp"), 1u);
    EXPECT_EQ(twice.entry, 0u);
    EXPECT_EQ(ref.count("main.twice"), 0u);

    std::set<std::string> outers;
    for (const FuncPlan* f : {&clamp, &twice}) {
      const auto& body = f == &clamp ? clamp_lines : twice_lines;
      // Probed and skipped sites alike are call-site marks (whether a site is probed is
      // checked against the fixtures' ground truth by tests/cases/inlined-*.json).
      std::vector<InlineSite> all = f->inline_sites;
      all.insert(all.end(), f->inline_skipped.begin(), f->inline_skipped.end());
      EXPECT_FALSE(all.empty()) << f->name;
      for (const auto& s : f->inline_skipped) EXPECT_FALSE(s.skip_reason.empty());
      for (const auto& s : all) {
        SCOPED_TRACE(f->name + " in " + std::string(s.outer));
        if (f == &clamp) outers.emplace(s.outer);
        // Inside the outer function, per debug/gosym.
        auto [lo, hi] = ref.equal_range(std::string(s.outer));
        ASSERT_NE(lo, hi);
        EXPECT_TRUE(s.pc >= lo->second.entry && s.pc < lo->second.end) << std::hex << s.pc;
        EXPECT_EQ(s.file.substr(s.file.rfind('/') + 1), "main.go");
        EXPECT_GT(s.line, body.second);  // the call site is below the callee in main.go
        // Maps back to the callee through the outer function's inline tree.
        const PclnFunc* outer = pc.find(s.pc);
        ASSERT_NE(outer, nullptr);
        EXPECT_EQ(outer->name, s.outer);
        auto tree = pc.inline_tree(*outer);
        bool names_callee = false;
        for (const auto& r : pc.inline_ranges(*outer)) {
          if (s.pc < r.lo || s.pc >= r.hi) continue;
          for (const auto& n : tree)
            if (n.index == r.index && n.name == f->name) names_callee = true;
        }
        for (const auto& n : tree)  // or the call site's mark when the body left no code
          if (n.name == f->name && n.parent_pc == s.pc) names_callee = true;
        EXPECT_TRUE(names_callee) << std::hex << s.pc;
        // Go's objdump attributes the instruction to a line of the callee's body, or to the
        // call line when the body compiled into the caller's instructions.
        if (!lines.empty()) {
          ASSERT_TRUE(lines.count(s.pc)) << std::hex << s.pc;
          int l = lines[s.pc];
          EXPECT_TRUE((l >= body.first && l <= body.second) || l == s.line) << l;
        }
      }
    }
    EXPECT_TRUE(outers.count("main.second"));
    EXPECT_TRUE(outers.count("main.third"));

    // Every site is the call's mark: the inline tree's parentPc, on the call's line (DWARF
    // low_pc is not a reference: it is the body's lowest pc, which may be hoisted code).
    const PclnFunc* any_outer = nullptr;
    for (const FuncPlan* f : {&clamp, &twice}) {
      for (const auto* list : {&f->inline_sites, &f->inline_skipped}) {
        for (const auto& s : *list) {
          const PclnFunc* outer = pc.find(s.pc);
          ASSERT_NE(outer, nullptr);
          any_outer = outer;
          bool is_mark = false;
          for (const auto& n : pc.inline_tree(*outer))
            is_mark |= n.name == f->name && n.parent_pc == s.pc;
          EXPECT_TRUE(is_mark) << f->name << " " << std::hex << s.pc;
        }
      }
    }
    EXPECT_NE(any_outer, nullptr);

    // Not probing inline sites is reported.
    PlanOptions no_inline;
    no_inline.probe_inline_sites = false;
    auto quiet = (*bin)->plan({"main.clamp"}, no_inline);
    ASSERT_TRUE(quiet.ok());
    EXPECT_FALSE(quiet->funcs[0].inline_probed);
    bool warned = false;
    for (const auto& w : quiet->warnings) warned |= w.find("main.clamp") != std::string::npos;
    EXPECT_TRUE(warned);
    EXPECT_LE(quiet->probe_count(), plan->probe_count());
    // Globs reach inlined-only functions too.
    auto glob = (*bin)->plan({"main.twi*"}, PlanOptions{});
    ASSERT_TRUE(glob.ok()) << glob.error().what();
    ASSERT_EQ(glob->funcs.size(), 1u);
    EXPECT_EQ(glob->funcs[0].name, "main.twice");
  }
}

// runtime.newproc1's callergp and callerpc, per release's sources: Go 1.17's
// newproc1(fn, argp, narg, callergp, callerpc) has them 4th and 5th (RDI, RSI), 1.18 on
// newproc1(fn, callergp, callerpc) 2nd and 3rd (RBX, RCX). The fixtures are 1.19 and later;
// the npm binaries (tests/tools/fetch-real-binaries.sh) add 1.17, 1.18, 1.20 and 1.25.
TEST(Plan, NewprocArgumentsPerRelease) {
  std::vector<std::pair<std::string, std::string>> bins;  // path, Go version
  for (const Fixture& fx : all_fixtures("basic"))
    if (fx.flavour == "stripped") bins.push_back({fx.path, "go" + fx.go_version});
  for (const auto& rb : testing::real_binaries()) {
    auto ref = nlohmann::json::parse(read_file(rb.path + ".gosym.json"), nullptr, false);
    if (ref.is_object()) bins.push_back({rb.path, ref.value("go_version", "")});
  }
  if (bins.empty()) GTEST_SKIP() << "no fixtures (run tests/tools/build-fixtures.sh)";
  bool saw_117 = false;
  for (const auto& [path, go] : bins) {
    SCOPED_TRACE(path + " " + go);
    auto bin = GoBinary::open(path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    auto g = (*bin)->goroutine_probes();
    ASSERT_TRUE(g.ok()) << g.error().what();
    EXPECT_TRUE(g->warnings.empty()) << g->warnings.front();
    const bool is_117 = go.rfind("go1.17", 0) == 0 && (go.size() == 6 || go[6] == '.');
    saw_117 |= is_117;
    EXPECT_EQ(g->create_gp_arg, is_117 ? 3 : 1);
    EXPECT_EQ(g->create_pc_arg, is_117 ? 4 : 2);
  }
  if (!testing::real_binaries().empty()) {
    EXPECT_TRUE(saw_117) << "no Go 1.17 npm binary";
  }
}

}  // namespace
}  // namespace gotap
