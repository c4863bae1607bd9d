// A hand-made plan for --if tests (tests/unit/test_cond.cpp) and the fuzz target
// (tests/fuzz/fuzz_cond.cpp): typed parameters in known registers and stack slots, so that a
// compiled condition can run on registers and memory the test writes.
//
//   main.handle(n int, s string, o *main.Order, k int32, xs []int, m map[string]int,
//               t string [stack +8], a [3]int [stack +24], b []byte [stack +48])
//              (~r0 error, ~r1 int,
//               ~r2 float64 [X0], ~r3 string [stack +8 at the return])
//   main.other(n int, x float64 [X0], y float32 [X1])
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/binary/rtype.h"
#include "core/model/go_types.h"
#include "core/plan/plan.h"

namespace gotap::testing {

// The memory a condition reads in these tests: regions the test puts at chosen addresses.
struct CondMemory : MemoryReader {
  std::map<uint64_t, std::string> regions;
  bool read(uint64_t addr, void* buf, size_t n) override {
    for (const auto& [at, bytes] : regions)
      if (addr >= at && addr + n <= at + bytes.size()) {
        std::memcpy(buf, bytes.data() + (addr - at), n);
        return true;
      }
    return false;
  }
  void put(uint64_t at, const void* p, size_t n) {
    regions[at] = std::string(static_cast<const char*>(p), n);
  }
};

inline ParamLoc cond_param(const char* name, const char* type, TypeId id, uint64_t size,
                           bool result, std::vector<uint8_t> regs) {
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

// A parameter in one float register, or in consecutive stack words at `stack`.
inline ParamLoc cond_param_at(const char* name, const char* type, TypeId id, uint64_t size,
                              bool result, LocPiece::Kind kind, uint8_t xreg, int64_t stack) {
  ParamLoc p = cond_param(name, type, id, size, result, {});
  if (kind == LocPiece::FloatReg) {
    LocPiece pc;
    pc.kind = kind;
    pc.reg = xreg;
    pc.size = static_cast<uint32_t>(size);
    p.loc.pieces.push_back(pc);
    return p;
  }
  for (uint32_t at = 0; at < size; at += 8) {
    LocPiece pc;
    pc.kind = LocPiece::Stack;
    pc.stack_offset = stack + at;
    pc.value_offset = at;
    pc.size = 8;
    p.loc.pieces.push_back(pc);
  }
  return p;
}

struct CondPlan {
  TypeGraph types;
  ProbePlan plan;

  CondPlan() {
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
    add(9, "[]int", GoKind::Slice, 24)->elem = 1;
    GoType* m = add(10, "map[string]int", GoKind::Map, 8);
    m->key = 2;
    m->elem = 1;
    add(11, "float32", GoKind::Float32, 4);
    GoType* a = add(12, "[3]int", GoKind::Array, 24);
    a->elem = 1;
    a->count = 3;
    add(13, "uint8", GoKind::Uint8, 1);
    add(14, "[]uint8", GoKind::Slice, 24)->elem = 13;
    types.index();
    FuncPlan f;
    f.name = "main.handle";
    f.args = {cond_param("n", "int", 1, 8, false, {0}),
              cond_param("s", "string", 2, 16, false, {1, 2}),
              cond_param("o", "*main.Order", 4, 8, false, {3}),
              cond_param("k", "int32", 8, 4, false, {4}),
              cond_param("xs", "[]int", 9, 24, false, {5, 6, 7}),
              cond_param("m", "map[string]int", 10, 8, false, {8}),
              cond_param_at("t", "string", 2, 16, false, LocPiece::Stack, 0, 8),
              cond_param_at("a", "[3]int", 12, 24, false, LocPiece::Stack, 0, 24),
              cond_param_at("b", "[]uint8", 14, 24, false, LocPiece::Stack, 0, 48)};
    f.results = {cond_param("~r0", "error", 5, 16, true, {0, 1}),
                 cond_param("~r1", "int", 1, 8, true, {2}),
                 cond_param_at("~r2", "float64", 7, 8, true, LocPiece::FloatReg, 0, 0),
                 cond_param_at("~r3", "string", 2, 16, true, LocPiece::Stack, 0, 8)};
    plan.funcs.push_back(f);
    FuncPlan g;
    g.name = "main.other";
    g.args = {cond_param("n", "int", 1, 8, false, {0}),
              cond_param_at("x", "float64", 7, 8, false, LocPiece::FloatReg, 0, 0),
              cond_param_at("y", "float32", 11, 4, false, LocPiece::FloatReg, 1, 0)};
    plan.funcs.push_back(g);
    plan.binary_view.types = &types;
    plan.binary_view.rt.types = 0x400000;
  }
};

}  // namespace gotap::testing
