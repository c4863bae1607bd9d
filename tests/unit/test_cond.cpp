// --if: the parser's errors (one line, the column), the type checker against a plan, and the
// compiled program run by the user-space interpreter on hand-made registers and memory (the
// kernel's interpreter runs the same bytecode: tests/cases/cond_*.json check both backends).
#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "core/cond/condition.h"
#include "core/cond/eval.h"
#include "core/cond/parser.h"
#include "core/decode/value_decoder.h"
#include "tests/unit/cond_plan.h"

namespace gotap::cond {
namespace {

using gotap::testing::CondMemory;

class Cond : public ::testing::Test {
 protected:
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
    ValueDecoder dec(mem, DecodeEnv{&fake.types, {}, {}}, DecodeLimits{});
    EvalEnv env{&entry_regs, &mem, 7, duration, 0, 0, &dec};
    bool r = run(p, false, env);
    if (!(p.flags & GOTAP_COND_AT_RET)) return r;
    env.regs = &ret_regs;
    return run(p, true, env);
  }

  std::string error_of(const std::string& expr) {
    auto c = build(expr);
    return c ? "" : c.error().what();
  }

  gotap::testing::CondPlan fake;
  ProbePlan& plan = fake.plan;
  CondMemory mem;
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

// Without --if, --slower or --errors nothing is compiled or kept per function: a whole
// binary's worth of empty programs was 43 MB of peak memory.
TEST_F(Cond, NoConditionKeepsNoPrograms) {
  auto c = build_condition(ConditionSpec{}, plan);
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_TRUE(c->funcs.empty());
  EXPECT_FALSE(c->at_ret(0));
  EXPECT_FALSE(c->never(0));
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

TEST_F(Cond, IndexingSlicesArraysAndMapsOnPtrace) {
  const int64_t xs[3] = {10, 20, 30};
  mem.put(0x5000, xs, sizeof xs);
  entry_regs.gp[5] = 0x5000;
  entry_regs.gp[6] = 3;
  entry_regs.gp[7] = 3;
  entry_regs.gp[0] = 1;  // n
  EXPECT_TRUE(eval("xs[0] == 10 && xs[2] == 30"));
  EXPECT_TRUE(eval("xs[n] == 20"));
  // Out of range is false, whichever way the comparison goes.
  EXPECT_FALSE(eval("xs[3] == 0"));
  EXPECT_FALSE(eval("xs[3] != 0"));
  EXPECT_FALSE(eval("xs[-1] != 0"));
  entry_regs.gp[0] = 7;
  EXPECT_FALSE(eval("xs[n] != 0"));
  // An array on the stack, by a constant index: an offset, which eBPF reads too.
  const int64_t a[3] = {4, 5, 6};
  entry_regs.sp = 0x7000;
  mem.put(0x7000 + 24, a, sizeof a);
  EXPECT_TRUE(eval("a[1] == 5 && a[2] == 6"));
  auto arr = build("a[1] == 5");
  ASSERT_TRUE(arr) << arr.error().what();
  EXPECT_EQ(arr->ebpf_problem, "");
  EXPECT_NE(
      error_of("a[3] == 1").find("column 3: a is [3]int: index it with a constant from 0 to 2"),
      std::string::npos)
      << error_of("a[3] == 1");
  // A map (the bucket layout of Go before 1.24): one bucket, two keys.
  struct {
    uint64_t count;
    uint8_t flags, b;
    uint16_t noverflow;
    uint32_t hash0;
    uint64_t buckets, old, nevacuate;
  } hmap{2, 0, 0, 0, 0, 0x8100, 0, 0};
  static_assert(sizeof hmap == 40);
  mem.put(0x8000, &hmap, sizeof hmap);
  uint8_t bucket[208] = {};
  bucket[0] = bucket[1] = 9;  // tophash: both slots full
  const uint64_t keys[4] = {0x8300, 4, 0x8310, 3};
  std::memcpy(bucket + 8, keys, sizeof keys);
  const int64_t vals[2] = {42, 43};
  std::memcpy(bucket + 8 + 8 * 16, vals, sizeof vals);
  mem.put(0x8100, bucket, sizeof bucket);
  mem.put(0x8300, "acme", 4);
  mem.put(0x8310, "bob", 3);
  entry_regs.gp[8] = 0x8000;
  EXPECT_TRUE(eval("m[\"acme\"] == 42"));
  EXPECT_TRUE(eval("m[\"bob\"] > 42"));
  EXPECT_FALSE(eval("m[\"zed\"] == 0"));
  EXPECT_FALSE(eval("m[\"zed\"] != 0"));
  EXPECT_FALSE(eval("m[\"acm\"] == 42"));
  entry_regs.gp[8] = 0;  // a nil map has no keys
  EXPECT_FALSE(eval("m[\"acme\"] == 42"));
  // eBPF evaluates neither: an error naming the part, before anything runs.
  auto c = build("n == 1 || xs[0] == 10");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_NE(c->ebpf_problem.find("column 11: xs[..] indexes a slice, which eBPF cannot read; use "
                                 "--backend=ptrace"),
            std::string::npos)
      << c->ebpf_problem;
  c = build("m[\"acme\"] == 1");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_NE(c->ebpf_problem.find("column 1: m[..] looks up a map"), std::string::npos)
      << c->ebpf_problem;
  EXPECT_NE(error_of("n[0] == 1").find("n is int: only slices, arrays and maps can be indexed"),
            std::string::npos);
  EXPECT_NE(error_of("m[1] == 1").find("column 3: m is map[string]int: index it with a string"),
            std::string::npos)
      << error_of("m[1] == 1");
}

TEST_F(Cond, FloatParametersAndResults) {
  const float y = 1.5f;
  std::memcpy(&entry_regs.xmm[1], &y, 4);
  const double x = -2.0;
  std::memcpy(&entry_regs.xmm[0], &x, 8);
  EXPECT_TRUE(eval("y > 1 && y < 1.6 && y == 1.5", 1));
  EXPECT_TRUE(eval("x < -1.5 && x == -2", 1));
  EXPECT_FALSE(eval("x > 0", 1));
  const double r2 = 0.25;
  std::memcpy(&ret_regs.xmm[0], &r2, 8);
  EXPECT_TRUE(eval("~r2 < 0.5 && ~r2 > 0"));
  auto c = build("~r2 > 0");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_TRUE(c->at_ret(0));
  EXPECT_NE(c->ebpf_problem.find("column 1: ~r2 is a float"), std::string::npos) << c->ebpf_problem;
  EXPECT_NE(error_of("x == y").find("cannot compare x (float64) with y"), std::string::npos)
      << error_of("x == y");
  EXPECT_NE(error_of("x == \"1\"").find("compare it with a number"), std::string::npos);
}

TEST_F(Cond, TwoOperandComparisons) {
  mem.put(0x1000, "hello", 5);
  mem.put(0x1100, "hello", 5);
  mem.put(0x1200, "hellp", 5);
  entry_regs.gp[0] = 5;  // n
  entry_regs.gp[1] = 0x1000;
  entry_regs.gp[2] = 5;
  entry_regs.sp = 0x7000;
  const uint64_t t[2] = {0x1100, 5};
  mem.put(0x7008, t, sizeof t);
  EXPECT_TRUE(eval("s == t"));
  EXPECT_FALSE(eval("s != t"));
  EXPECT_TRUE(eval("len(s) == n && len(t) <= n"));
  const uint64_t t2[2] = {0x1200, 5};
  mem.put(0x7008, t2, sizeof t2);
  EXPECT_FALSE(eval("s == t"));
  EXPECT_TRUE(eval("s != t"));
  // Strings past the bound: unknown, so false both ways, as in the kernel.
  std::string long_s(200, 'z');
  mem.put(0x3000, long_s.data(), long_s.size());
  entry_regs.gp[1] = 0x3000;
  entry_regs.gp[2] = long_s.size();
  const uint64_t t3[2] = {0x3000, long_s.size()};
  mem.put(0x7008, t3, sizeof t3);
  EXPECT_FALSE(eval("s == t"));
  EXPECT_FALSE(eval("s != t"));
  // A result against an argument: the argument is read at the entry and kept.
  ret_regs.gp[2] = 6;   // ~r1
  ret_regs.gp[0] = 99;  // the register n was in, reused by then
  EXPECT_TRUE(eval("~r1 > n"));
  EXPECT_FALSE(eval("~r1 == n"));
  EXPECT_TRUE(eval("n < ~r1 && n == 5"));
  auto c = build("~r1 > n");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_TRUE(c->at_ret(0));
  EXPECT_EQ(c->ebpf_problem, "");
  // Type mismatches point at the operand.
  EXPECT_NE(error_of("s == n").find("column 6: cannot compare s (string) with n (int)"),
            std::string::npos)
      << error_of("s == n");
  EXPECT_NE(error_of("n == s").find("column 6: cannot compare n (int) with s (string)"),
            std::string::npos)
      << error_of("n == s");
  EXPECT_NE(error_of("s == ~r3").find("a string argument compared with a string result"),
            std::string::npos)
      << error_of("s == ~r3");
  EXPECT_NE(error_of("xs[~r1] == 1")
                .find("column 1: xs is an argument inside an expression of a "
                      "result"),
            std::string::npos)
      << error_of("xs[~r1] == 1");
  EXPECT_NE(error_of("~r1 > n && ~r1 > k && ~r1 < len(s)").find("at most 2 arguments"),
            std::string::npos);
}

// A []byte is compared as its bytes, up to its length (not its capacity), with every string
// operation and against a string operand, on both backends (the same bytecode as a string's).
TEST_F(Cond, ByteSlicesCompareAsTheirBytes) {
  mem.put(0x2000, "PUB foo 5\r\nhello", 16);
  entry_regs.sp = 0x7000;
  const uint64_t b[3] = {0x2000, 9, 16};  // "PUB foo 5" in a buffer of 16
  mem.put(0x7000 + 48, b, sizeof b);
  EXPECT_TRUE(eval("hasPrefix(b, \"PUB\")"));
  EXPECT_FALSE(eval("hasPrefix(b, \"SUB\")"));
  EXPECT_TRUE(eval("b == \"PUB foo 5\""));
  EXPECT_FALSE(eval("b == \"PUB foo\""));
  EXPECT_FALSE(eval("b == \"PUB foo 5\\r\\n\""));  // past len, within cap
  EXPECT_TRUE(eval("b != \"PUB\""));
  EXPECT_TRUE(eval("\"PUB foo 5\" == b && \"x\" != b"));
  EXPECT_TRUE(eval("contains(b, \"foo\")"));
  EXPECT_FALSE(eval("contains(b, \"hello\")"));
  EXPECT_TRUE(eval("len(b) == 9 && b != nil"));
  mem.put(0x2100, "PUB foo 5", 9);
  entry_regs.gp[1] = 0x2100;  // s
  entry_regs.gp[2] = 9;
  EXPECT_TRUE(eval("b == s && s == b"));
  entry_regs.gp[2] = 3;
  EXPECT_FALSE(eval("b == s"));
  EXPECT_TRUE(eval("s != b"));
  // A nil []byte is "", as string(b) is in Go.
  const uint64_t nil_b[3] = {0, 0, 0};
  mem.put(0x7000 + 48, nil_b, sizeof nil_b);
  EXPECT_TRUE(eval("b == \"\" && b == nil"));
  EXPECT_FALSE(eval("hasPrefix(b, \"P\")"));
  auto c = build("hasPrefix(b, \"PUB\") || b == s");
  ASSERT_TRUE(c) << c.error().what();
  EXPECT_EQ(c->ebpf_problem, "");
  // Other slices are not strings.
  EXPECT_NE(error_of("hasPrefix(xs, \"a\")").find("column 11: xs is []int, not a string or []byte"),
            std::string::npos)
      << error_of("hasPrefix(xs, \"a\")");
  EXPECT_NE(error_of("s == xs").find("cannot compare s (string) with xs ([]int)"),
            std::string::npos)
      << error_of("s == xs");
  EXPECT_NE(error_of("b < \"a\"").find("strings compare with =="), std::string::npos);
  EXPECT_NE(error_of("b == 1").find("b is []uint8: compare it with a string"), std::string::npos)
      << error_of("b == 1");
}

// A literal on the left is compiled as the mirrored comparison (`5 > n` as `n < 5`): every
// operator, both ways, with the variable below, at and above the literal, against C++'s own
// answer. Signed (a negative literal too), unsigned (len) and float (ptrace only) operands.
TEST_F(Cond, LiteralOnTheLeftMirrorsEveryOperator) {
  struct Op {
    const char* op;
    const char* mirror;
    bool (*holds)(double, double);
  };
  const Op ops[] = {{"==", "==", [](double a, double b) { return a == b; }},
                    {"!=", "!=", [](double a, double b) { return a != b; }},
                    {"<", ">", [](double a, double b) { return a < b; }},
                    {"<=", ">=", [](double a, double b) { return a <= b; }},
                    {">", "<", [](double a, double b) { return a > b; }},
                    {">=", "<=", [](double a, double b) { return a >= b; }}};
  size_t checked = 0;
  for (const Op& o : ops) {
    for (int64_t lit : {5, -5}) {
      for (int64_t n : {lit - 1, lit, lit + 1}) {
        entry_regs.gp[0] = static_cast<uint64_t>(n);
        const std::string l = std::to_string(lit);
        const bool want = o.holds(static_cast<double>(lit), static_cast<double>(n));
        EXPECT_EQ(eval(l + " " + o.op + " n"), want) << l << " " << o.op << " n, n = " << n;
        EXPECT_EQ(eval("n " + std::string(o.mirror) + " " + l), want)
            << "n " << o.mirror << " " << l << ", n = " << n;
        ++checked;
      }
    }
    const char* str = "hello";
    mem.put(0x1000, str, 5);
    entry_regs.gp[1] = 0x1000;
    for (uint64_t len : {4u, 5u, 6u}) {
      entry_regs.gp[2] = len;
      const bool want = o.holds(5, static_cast<double>(len));
      EXPECT_EQ(eval(std::string("5 ") + o.op + " len(s)"), want)
          << "5 " << o.op << " len(s), len = " << len;
      EXPECT_EQ(eval(std::string("len(s) ") + o.mirror + " 5"), want);
    }
    for (double x : {1.0, 1.5, 2.0}) {
      std::memcpy(&entry_regs.xmm[0], &x, 8);
      const bool want = o.holds(1.5, x);
      EXPECT_EQ(eval(std::string("1.5 ") + o.op + " x", 1), want)
          << "1.5 " << o.op << " x, x = " << x;
      EXPECT_EQ(eval(std::string("x ") + o.mirror + " 1.5", 1), want);
    }
  }
  EXPECT_EQ(checked, 36u);
}

TEST(CondRuntimeSpelling, CutsPackagePaths) {
  EXPECT_EQ(runtime_spelling("*io/fs.PathError"), "*fs.PathError");
  EXPECT_EQ(runtime_spelling("map[string]*net/http.Request"), "map[string]*http.Request");
  EXPECT_EQ(runtime_spelling("main.T"), "main.T");
}

}  // namespace
}  // namespace gotap::cond
