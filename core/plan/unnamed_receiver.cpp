#include "core/plan/unnamed_receiver.h"

#include <algorithm>
#include <string>

#include "core/binary/dwarf_info.h"

namespace gotap {
namespace {

// The function's _func.args as the compiler computes it for ABIInternal (ArgWidth of its
// ABI info): the spill space of the inputs, laid out as ABI0 would lay them, plus the
// results that do not fit in registers. Seen on Go 1.19 to 1.27: 40 for
// func (T) M(int, string) int with a 16-byte T, its int result not counted.
uint64_t arg_width(const TypeGraph& types, const std::vector<AbiParamIn>& ps) {
  uint64_t end = 8;  // offsets count from the entry RSP, whose first word is the return PC
  for (const ParamLoc& l : assign_abi0(types, ps)) {
    if (l.is_result) continue;
    for (const LocPiece& p : l.loc.pieces) end = std::max<uint64_t>(end, p.stack_offset + p.size);
  }
  uint64_t width = (end - 8 + 7) / 8 * 8;
  for (const ParamLoc& l : assign_abi_internal(types, ps)) {
    if (!l.is_result) continue;
    for (const LocPiece& p : l.loc.pieces)
      if (p.kind == LocPiece::Stack) width += (p.size + 7) / 8 * 8;
  }
  return width;
}

bool fits(const TypeGraph& types, const std::vector<AbiParamIn>& ps, int32_t args_size) {
  return arg_width(types, ps) == static_cast<uint64_t>(args_size);
}

}  // namespace

bool restore_unnamed_receiver(const TypeGraph& types, const std::string& func_name,
                              int32_t args_size, std::vector<AbiParamIn>& in) {
  if (args_size < 0) return false;
  // Closures, method values and generic instantiations get their receivers and contexts
  // otherwise (abi.h); wrappers are the DWARF loader's (add_wrapper_receiver).
  if (func_name.find(".func") != std::string::npos || func_name.ends_with("-fm") ||
      func_name.find('[') != std::string::npos)
    return false;
  if (!in.empty() && in.front().name == ".this") return false;
  std::string recv = method_receiver_type(func_name);
  if (recv.empty()) return false;
  const GoType* rt = types.by_name(recv);
  if (!rt && recv[0] == '*') rt = types.by_name("unsafe.Pointer");
  if (!rt || rt->size == 0) return false;
  if (fits(types, in, args_size)) return false;
  std::vector<AbiParamIn> with = in;
  with.insert(with.begin(), AbiParamIn{"~p0", rt->id, false});  // as Go 1.22+ names it
  if (!fits(types, with, args_size)) return false;              // something else is amiss: leave it
  in = std::move(with);
  return true;
}

}  // namespace gotap
