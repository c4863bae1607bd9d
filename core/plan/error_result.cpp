#include "core/plan/error_result.h"

namespace gotap {

std::optional<LocPiece> error_word(const FuncPlan& f) {
  for (auto it = f.results.rbegin(); it != f.results.rend(); ++it) {
    if (!it->is_result || it->type_name != "error" || it->size != 16) continue;
    for (const LocPiece& piece : it->loc.pieces) {
      if (piece.value_offset != 0 || piece.size < 8) continue;
      if (piece.kind != LocPiece::FloatReg && piece.reg_byte == 0) return piece;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

bool failures_countable(const FuncPlan& f) {
  return f.entry_probe != 0 && !f.ret_sites.empty() && error_word(f).has_value();
}

}  // namespace gotap
