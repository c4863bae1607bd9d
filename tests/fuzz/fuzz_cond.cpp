// libFuzzer target: --if expressions are typed by whoever runs gotap, and scripts build them
// from data. The parser, the type checker and the compiler must answer any bytes with a tree
// or one error, never crash, and the compiled program must stay inside the VM's bounds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cond/condition.h"
#include "core/cond/eval.h"
#include "core/cond/parser.h"
#include "core/decode/value_decoder.h"
#include "tests/unit/cond_plan.h"

namespace {

struct ZeroMemory : gotap::MemoryReader {
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr < 4096) return false;
    __builtin_memset(buf, 0x41, n);
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gotap::testing::CondPlan fx;
  gotap::cond::ConditionSpec spec;
  spec.expr.assign(reinterpret_cast<const char*>(data), size);
  auto c = gotap::cond::build_condition(spec, fx.plan);
  // No condition at all (empty or blank input) keeps no programs to run.
  if (!c || c->funcs.size() < 2) return 0;
  ZeroMemory mem;
  gotap::RegState rs;
  for (int i = 0; i < gotap::kNumIntRegs; ++i) rs.gp[i] = 0x10000 + i;
  rs.sp = 0x20000;
  gotap::ValueDecoder dec(mem, gotap::DecodeEnv{&fx.types, {}, {}}, gotap::DecodeLimits{});
  gotap::cond::EvalEnv env{&rs, &mem, 1, 5, 0, 0, &dec};
  gotap::cond::run(c->funcs[0].prog, false, env);
  gotap::cond::run(c->funcs[0].prog, true, env);
  gotap::cond::EvalEnv other{&rs, &mem, 1, 5, 0, 0, &dec};
  gotap::cond::run(c->funcs[1].prog, false, other);
  return 0;
}
