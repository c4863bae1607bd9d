#include "core/plan/stack_symbols.h"

#include <fmt/format.h>

namespace gotap {

nlohmann::json symbolize(const BinaryView& bin, uint64_t bias, const std::vector<uint64_t>& pcs,
                         int max) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < pcs.size() && static_cast<int>(out.size()) < max; ++i) {
    const std::string pc = fmt::format("{:#x}", pcs[i]);
    // Return addresses point after the call: look up the call instruction itself.
    auto frames = bin.frames_at(pcs[i] - bias - (i > 0 ? 1 : 0), max - out.size());
    if (frames.empty()) out.push_back({{"pc", pc}, {"func", "?"}});
    for (auto& f : frames) {
      nlohmann::json fr = {{"pc", pc}, {"func", std::move(f.func)}};
      if (!f.file.empty()) {
        fr["file"] = std::move(f.file);
        fr["line"] = f.line;
      }
      if (f.inlined) fr["inlined"] = true;
      out.push_back(std::move(fr));
    }
  }
  return out;
}

void put_inlined_callee_on_top(nlohmann::json& st, const FuncPlan& f, int max) {
  if (!st.is_array() || st.empty() || st[0].value("func", "") == f.name) return;
  nlohmann::json top = {{"pc", st[0].value("pc", "")}, {"func", f.name}};
  if (!f.file.empty()) {
    top["file"] = f.file;
    top["line"] = f.line;
  }
  top["inlined"] = true;
  st.insert(st.begin(), std::move(top));
  if (static_cast<int>(st.size()) > max) st.erase(st.end() - 1);
}

}  // namespace gotap
