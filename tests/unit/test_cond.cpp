// --if: the parser's errors (one line, the column), the type checker against a plan, and the
// compiled program run by the user-space interpreter on hand-made registers and memory (the
// kernel's interpreter runs the same bytecode: tests/cases/cond_*.json check both backends).
#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "core/cond/condition.h"
#include "core/cond/eval.h"
#include "core/cond/parser.h"

namespace gotap::cond {
namespace {

struct FakeMemory : MemoryReader {
  std::map<uint64_t, std::string> regions;
  bool read(uint64_t addr, void* buf, size_t n) override {
    for (const auto& [at, bytes] : regions) {
      if (addr >= at && addr + n <= at + bytes.size()) {
        std::memcpy(buf, bytes.data() + (addr - at), n);
        return true;
      }
    }
    return false;
  }
  void put(uint64_t at, const void* p, size_t n) {
    regions[at] = std::string(static_cast<const char*>(p), n);
  }
};

ParamLoc param(const char* name, const char* type, TypeId id, uint64_t size, bool result,
               std::vector<uint8_t> regs) {
  ParamLoc p;
  p.name = name;
  p.type_name = type;
  p.type = id;
  p.size = size;
  p.is_result = result;
  uint32_t at = 0;
  for (uint8_t r : regs) {
    LocPiece pc;
    pc.kind = LocPiece::IntReg;
    pc.reg = r;
    pc.value_offset = at;
    pc.size = 8;
    p.loc.pieces.push_back(pc);
    at += 8;
  }
  return p;
}

class Cond : public ::testing::Test {
 protected:
  void SetUp() override {
    auto add = [&](TypeId id, const char* name, GoKind k, uint64_t size) {
      GoType t;
      t.id = id;
      t.name = name;
      t.kind = k;
      t.size = size;
      return &types.add(t);
    };
    add(1, "int", GoKind::Int, 8);
    add(2, "string", GoKind::String, 16);
    GoType* st = add(3, "main.Order", GoKind::Struct, 24);
    st->fields = {{"ID", 1, 0, false}, {"Customer", 2, 8, false}};
    add(4, "*main.Order", GoKind::Ptr, 8)->elem = 3;
    GoType* e = add(5, "error", GoKind::Interface, 16);
    e->fields = {{"tab", 4, 0, false}, {"data", 4, 8, false}};
    add(6, "*io/fs.PathError", GoKind::Ptr, 8)->runtime_type = 0x100;
    add(7, "float64", GoKind::Float64, 8);
    add(8, "int32", GoKind::Int32, 4);
    types.index();
    FuncPlan f;
    f.name = "main.handle";
    f.args = {param("n", "int", 1, 8, false, {0}), param("s", "string", 2, 16, false, {1, 2}),
              param("o", "*main.Order", 4, 8, false, {3}), param("k", "int32", 8, 4, false, {4})};
    f.results = {param("~r0", "error", 5, 16, true, {0, 1})};
    plan.funcs.push_back(f);
    FuncPlan g;
    g.name = "main.other";
    g.args = {param("n", "int", 1, 8, false, {0})};
    ParamLoc x = param("x", "float64", 7, 8, false, {});
    LocPiece xp;
    xp.kind = LocPiece::FloatReg;
    xp.reg = 0;
    xp.size = 8;
    x.loc.pieces.push_back(xp);
    g.args.push_back(x);
    plan.funcs.push_back(g);
    plan.binary_view.types = &types;
    plan.binary_view.rt.types = 0x400000;
  }

  Result<Condition> build(const std::string& expr) {
    ConditionSpec spec;
    spec.expr = expr;
    return build_condition(spec, plan);
  }

  // Runs expr for main.handle (func 0) with n, s, o, and the results r0/r1 at the return.
  bool eval(const std::string& expr, size_t func = 0) {
    auto c = build(expr);
    EXPECT_TRUE(c) << (c ? "" : c.error().what());
    if (!c) return false;
    const gotap_cond& p = c->funcs[func].prog;
    EvalEnv env{&entry_regs, &mem, 7, duration, 0, 0};
    bool r = run(p, false, env);
    if (!(p.flags & GOTAP_COND_AT_RET)) return r;
    env.regs = &ret_regs;
    return run(p, true, env);
  }

  std::string error_of(const std::string& expr) {
    auto c = build(expr);
    return c ? "" : c.error().what();
  }

  TypeGraph types;
  ProbePlan plan;
  FakeMemory mem;
  RegState entry_regs, ret_regs;
  uint64_t duration = 0;
};

TEST_F(Cond, SyntaxErrorsPointAtTheColumn) {
  EXPECT_EQ(error_of("n == "),
            "--if: column 6: expected an operand, not end of the condition "
            "(at the end)");
  EXPECT_EQ(error_of("n = 3"),
            "--if: column 3: '=' is not an operator (did you mean '=='?) "
            "(at '= 3')");
  EXPECT_NE(error_of("s == \"abc").find("string not closed"), std::string::npos);
  EXPECT_NE(error_of("(n == 1").find("column 8: expected ')'"), std::string::npos);
  EXPECT_NE(error_of("n == 1 == 2").find("do not chain"), std::string::npos);
  EXPECT_NE(error_of("  ").find("empty"), std::string::npos);
  EXPECT_NE(error_of("n == 10 q").find("column 9"), std::string::npos);
  EXPECT_NE(error_of("duration > 10parsecs").find("bad"), std::string::npos);
}

TEST_F(Cond, UnknownNamesAndTypeMismatches) {
  EXPECT_NE(error_of("nope == 1")
                .find("column 1: no probed function has a parameter or result "
                      "named nope"),
            std::string::npos);
  EXPECT_NE(error_of("o.ID == \"x\"").find("o.ID is int: compare it with an integer"),
            std::string::npos);
  EXPECT_NE(error_of("o.Nope == 1").find("has no field Nope"), std::string::npos);
  EXPECT_NE(error_of("s < \"a\"").find("strings compare with =="), std::string::npos);
  EXPECT_NE(error_of("n == nil").find("cannot be nil"), std::string::npos);
  EXPECT_NE(error_of("n").find("not a condition"), std::string::npos);
  EXPECT_NE(error_of("type(~r0) == \"*nosuch.T\"").find("no type *nosuch.T"), std::string::npos);
  EXPECT_NE(error_of("n == 1 || ~r0 == s").find("column"), std::string::npos);
}

TEST_F(Cond, ANameOneFunctionLacksMakesItFalseThere) {
  auto c = build("s == \"a\"");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_FALSE(c->never(0));
  EXPECT_TRUE(c->never(1));
}

TEST_F(Cond, FloatsAreForPtraceOnly) {
  auto c = build("x > 1.5");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_NE(c->ebpf_problem.find("x is a float"), std::string::npos) << c->ebpf_problem;
  EXPECT_NE(c->ebpf_problem.find("--backend=ptrace"), std::string::npos);
  double v = 2.5;
  std::memcpy(&entry_regs.xmm[0], &v, 8);
  EXPECT_TRUE(eval("x > 1.5", 1));
  EXPECT_FALSE(eval("x > 2.5", 1));
}

TEST_F(Cond, IntegersAndStrings) {
  entry_regs.gp[0] = static_cast<uint64_t>(-3);
  entry_regs.gp[4] = 0xffffffff00000009ull;  // int32 9 in a register with junk above
  const char* str = "hello, world";
  mem.put(0x1000, str, std::strlen(str));
  entry_regs.gp[1] = 0x1000;
  entry_regs.gp[2] = std::strlen(str);
  EXPECT_TRUE(eval("n == -3"));
  EXPECT_TRUE(eval("n < 0 && n >= -3"));
  EXPECT_FALSE(eval("n > 0"));
  EXPECT_TRUE(eval("k == 9"));
  EXPECT_TRUE(eval("s == \"hello, world\""));
  EXPECT_FALSE(eval("s == \"hello\""));
  EXPECT_TRUE(eval("s != \"hello\""));
  EXPECT_TRUE(eval("hasPrefix(s, \"hello\")"));
  EXPECT_FALSE(eval("hasPrefix(s, \"world\")"));
  EXPECT_TRUE(eval("contains(s, \"o, w\")"));
  EXPECT_FALSE(eval("contains(s, \"xyz\")"));
  EXPECT_TRUE(eval("len(s) == 12"));
  EXPECT_TRUE(eval("!(len(s) > 12) && (n == 1 || goid == 7)"));
}

TEST_F(Cond, PointerFieldsAndNil) {
  struct {
    int64_t id;
    uint64_t ptr, len;
  } order{42, 0x3000, 4};
  mem.put(0x2000, &order, sizeof(order));
  mem.put(0x3000, "acme", 4);
  entry_regs.gp[3] = 0x2000;
  EXPECT_TRUE(eval("o != nil && o.ID == 42"));
  EXPECT_TRUE(eval("o.Customer == \"acme\""));
  EXPECT_FALSE(eval("o == nil"));
  entry_regs.gp[3] = 0;
  EXPECT_TRUE(eval("o == nil"));
  // Through a nil pointer a comparison is false, whichever way it goes.
  EXPECT_FALSE(eval("o.ID == 0"));
  EXPECT_FALSE(eval("o.ID != 0"));
  EXPECT_TRUE(eval("o == nil || o.ID == 1"));
}

TEST_F(Cond, ResultsDurationAndDynamicTypes) {
  entry_regs.gp[0] = 5;
  ret_regs.gp[0] = 0x9000;  // the itab
  ret_regs.gp[1] = 0x9100;
  uint64_t itab[2] = {0, 0x400000 + 0x100};
  mem.put(0x9000, itab, sizeof(itab));
  duration = 20'000'000;
  EXPECT_TRUE(eval("~r0 != nil"));
  EXPECT_TRUE(eval("type(~r0) == \"*fs.PathError\""));
  EXPECT_TRUE(eval("type(~r0) == \"*io/fs.PathError\""));
  EXPECT_FALSE(eval("type(~r0) != \"*fs.PathError\""));
  EXPECT_TRUE(eval("duration > 10ms"));
  EXPECT_FALSE(eval("duration > 1s"));
  // Argument parts are decided at the entry and kept for the return.
  EXPECT_TRUE(eval("n == 5 && duration > 10ms"));
  EXPECT_FALSE(eval("n == 6 && duration > 10ms"));
  EXPECT_TRUE(eval("n == 6 || ~r0 != nil"));
  ret_regs.gp[0] = 0;
  EXPECT_FALSE(eval("~r0 != nil"));
  EXPECT_FALSE(eval("type(~r0) == \"*fs.PathError\""));
}

TEST_F(Cond, Shorthands) {
  ConditionSpec spec;
  spec.errors = true;
  spec.slower_ns = 1'000'000;
  auto c = build_condition(spec, plan);
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_TRUE(c->at_ret(0));
  EXPECT_TRUE(c->never(1));  // main.other returns no error
  ProbePlan no_errors = plan;
  no_errors.funcs.erase(no_errors.funcs.begin());
  EXPECT_EQ(std::string(build_condition(spec, no_errors).error().what()),
            "--errors: none of the probed functions returns an error");
  uint64_t ns = 0;
  EXPECT_TRUE(parse_duration("1m30s", &ns));
  EXPECT_EQ(ns, 90'000'000'000u);
  EXPECT_TRUE(parse_duration("250us", &ns));
  EXPECT_EQ(ns, 250'000u);
  EXPECT_FALSE(parse_duration("10", &ns));
  EXPECT_FALSE(parse_duration("ms", &ns));
}

TEST(CondRuntimeSpelling, CutsPackagePaths) {
  EXPECT_EQ(runtime_spelling("*io/fs.PathError"), "*fs.PathError");
  EXPECT_EQ(runtime_spelling("map[string]*net/http.Request"), "map[string]*http.Request");
  EXPECT_EQ(runtime_spelling("main.T"), "main.T");
}

}  // namespace
}  // namespace gotap::cond
