// Where each parameter and result of a Go function lives: the ABIInternal register
// assignment (amd64, Go >= 1.17), ABI0 (stack), or, without DWARF, the ArgInfo words.
// The ABI: Go's src/cmd/compile/abi-internal.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/binary/pclntab.h"
#include "core/model/go_types.h"

namespace gotap {

// Integer argument registers in ABIInternal order; RDX after them, for the System V plans of
// gccgo functions (core/plan/sysv_abi.h). kNumIntRegs counts ABIInternal's only; the backends
// read RDX too (kNumValueRegs): a System V argument or second result.
enum class Reg : uint8_t { RAX, RBX, RCX, RDI, RSI, R8, R9, R10, R11, RDX };
constexpr int kNumIntRegs = 9;
constexpr int kNumValueRegs = kNumIntRegs + 1;
constexpr int kNumFloatRegs = 15;  // X0..X14
const char* reg_name(Reg r);

struct LocPiece {
  // RegMem: in memory at the address a register holds (a gccgo result returned in memory:
  // the caller's buffer, whose address comes back in rax).
  enum Kind : uint8_t { IntReg, FloatReg, Stack, RegMem } kind = Stack;
  uint8_t reg = 0;            // IntReg, RegMem: index into Reg; FloatReg: xmm number
  int64_t stack_offset = 0;   // Stack: offset from RSP at entry / at RET ([RSP] = return PC);
                              // RegMem: offset from the register's address
  uint32_t value_offset = 0;  // where this piece sits inside the Go value
  uint32_t size = 0;          // bytes
  // IntReg, FloatReg: the byte of the register the piece starts at (gccgo's results share a
  // register: (int32, int32) comes back in rax's low and high halves).
  uint8_t reg_byte = 0;
};

struct ValueLoc {
  std::vector<LocPiece> pieces;
  // "rax", "rbx+rcx", "x0", "stack+8", "" for zero-size values.
  std::string describe() const;
  bool in_registers() const;
};

struct ParamLoc {
  std::string name;       // DWARF name, or "arg0", "arg1", ... without DWARF
  std::string type_name;  // Go type name, or e.g. "word64" without DWARF
  TypeId type = 0;        // DWARF type, 0 without DWARF
  uint64_t size = 0;
  bool is_result = false;
  ValueLoc loc;
};

struct AbiParamIn {
  std::string name;
  TypeId type = 0;
  bool is_result = false;
};

struct AbiOptions {
  // Shape functions of generics ("pkg.F[go.shape.int]") take a hidden dictionary pointer
  // that optimized builds leave out of DWARF (`-N -l` builds list it as ".dict", and then it
  // is assigned like any other param). Where it goes depends on the Go version:
  enum class Dict : uint8_t {
    None,
    First,          // before everything: functions; and methods up to Go 1.19
    AfterReceiver,  // methods of generic types from Go 1.20 (unified IR)
  };
  Dict dict = Dict::None;
};

// True for a generic function instantiated for shapes ("[go.shape." in the name).
bool is_shape_function(std::string_view name);
// Where the hidden dictionary of `func_name` goes (None: not a shape function, or a closure
// inside one, which reaches the dictionary through its context). go_minor: 21 for go1.21.
AbiOptions::Dict dict_position(std::string_view func_name, int go_minor);

// ABIInternal assignment of params (receiver and args, then results) with the types of `g`.
// The output follows the input order; results may be given anywhere in `ps`.
std::vector<ParamLoc> assign_abi_internal(const TypeGraph& g, const std::vector<AbiParamIn>& ps,
                                          const AbiOptions& opts = {});
// ABI0: everything on the stack, args from RSP+8, results after them (pointer aligned).
std::vector<ParamLoc> assign_abi0(const TypeGraph& g, const std::vector<AbiParamIn>& ps);

// Without DWARF: the argument words as ArgInfo groups them, one ParamLoc per top-level
// ArgInfo element (an aggregate is one param with several pieces), named arg0, arg1, ...
// A word at argument-frame offset o is the register whose morestack spill slot is
// [entry RSP + 8 + o] (verified on Go 1.19-1.26: every register word of ~800-1000 functions
// per binary agrees with DWARF and assign_abi_internal). Words below the lowest spill slot
// are stack arguments ("stack+8+o"). Functions without spills (frameless leaves, NOSPLIT):
// a word that would be in a register has no location, since which register depends on types
// ArgInfo does not give (a float goes to an X register and shifts the integers after it).
// When ArgInfo stops at its limit (10 words), a last param named "..." says more follow.
// Results are unknown.
// Caveat from the compiler (ssagen.EmitArgInfo): for any function with "[" in its name the
// first ABI input is left out. That is the dictionary for shape functions, but the receiver
// for methods of generic types since Go 1.20, and the first real argument for closures
// inside generic functions, so arg0 is not always the first declared argument there.
struct RegSpill {
  LocPiece reg;          // IntReg or FloatReg
  int64_t spill_offset;  // offset from entry RSP
};
std::vector<ParamLoc> args_from_arginfo(const std::vector<ArgInfoItem>& items,
                                        const std::vector<RegSpill>& spills, bool regabi);

}  // namespace gotap
