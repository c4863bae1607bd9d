// Go 1.21 and older leave an unnamed receiver ("func (T) M()", "func (*T) M()") out of the
// method's DWARF, though the receiver is passed first like any other: without it, every
// argument would be read from the register of the one before it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/plan/abi.h"

namespace gotap {

// Puts the receiver back at the front of `in` (a method's DWARF parameters, results
// included) when the DWARF left it out, and says whether it did. `args_size` is the
// function's _func.args, the size of its argument frame: it tells a missing receiver from a
// present one even when the first argument has the receiver's type. Only for ABIInternal
// functions, which every method with DWARF is. A zero-size receiver changes no location
// and is left as it is.
bool restore_unnamed_receiver(const TypeGraph& types, const std::string& func_name,
                              int32_t args_size, std::vector<AbiParamIn>& in);

}  // namespace gotap
