// libFuzzer target: --if expressions are typed by whoever runs gotap, and scripts build them
// from data. The parser, the type checker and the compiler must answer any bytes with a tree
// or one error, never crash, and the compiled program must stay inside the VM's bounds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cond/condition.h"
#include "core/cond/eval.h"
#include "core/cond/parser.h"

namespace {

struct ZeroMemory : gotap::MemoryReader {
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr < 4096) return false;
    __builtin_memset(buf, 0x41, n);
    return true;
  }
};

// A function with an int, a string, a pointer to a struct and an error result.
struct Fixture {
  gotap::TypeGraph types;
  gotap::ProbePlan plan;
  Fixture() {
    auto add = [&](gotap::TypeId id, const char* name, gotap::GoKind k, uint64_t size) {
      gotap::GoType t;
      t.id = id;
      t.name = name;
      t.kind = k;
      t.size = size;
      return &types.add(t);
    };
    add(1, "int", gotap::GoKind::Int, 8);
    add(2, "string", gotap::GoKind::String, 16);
    gotap::GoType* st = add(3, "main.Order", gotap::GoKind::Struct, 24);
    st->fields = {{"ID", 1, 0, false}, {"Customer", 2, 8, false}};
    gotap::GoType* pt = add(4, "*main.Order", gotap::GoKind::Ptr, 8);
    pt->elem = 3;
    gotap::GoType* e = add(5, "error", gotap::GoKind::Interface, 16);
    e->fields = {{"tab", 4, 0, false}, {"data", 4, 8, false}};
    gotap::GoType* pe = add(6, "*io/fs.PathError", gotap::GoKind::Ptr, 8);
    pe->runtime_type = 0x100;
    types.index();
    gotap::FuncPlan f;
    f.name = "main.handle";
    auto param = [](const char* name, const char* type, gotap::TypeId id, uint64_t size,
                    bool result, std::vector<uint8_t> regs) {
      gotap::ParamLoc p;
      p.name = name;
      p.type_name = type;
      p.type = id;
      p.size = size;
      p.is_result = result;
      uint32_t at = 0;
      for (uint8_t r : regs) {
        gotap::LocPiece pc;
        pc.kind = gotap::LocPiece::IntReg;
        pc.reg = r;
        pc.value_offset = at;
        pc.size = 8;
        p.loc.pieces.push_back(pc);
        at += 8;
      }
      return p;
    };
    f.args = {param("n", "int", 1, 8, false, {0}), param("s", "string", 2, 16, false, {1, 2}),
              param("o", "*main.Order", 4, 8, false, {3})};
    f.results = {param("~r0", "error", 5, 16, true, {0, 1})};
    plan.funcs.push_back(f);
    plan.binary_view.types = &types;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  gotap::cond::ConditionSpec spec;
  spec.expr.assign(reinterpret_cast<const char*>(data), size);
  auto c = gotap::cond::build_condition(spec, fx.plan);
  if (!c) return 0;
  ZeroMemory mem;
  gotap::RegState rs;
  for (int i = 0; i < gotap::kNumIntRegs; ++i) rs.gp[i] = 0x10000 + i;
  rs.sp = 0x20000;
  gotap::cond::EvalEnv env{&rs, &mem, 1, 5, 0, 0};
  gotap::cond::run(c->funcs[0].prog, false, env);
  gotap::cond::run(c->funcs[0].prog, true, env);
  return 0;
}
