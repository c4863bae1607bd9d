#include "backends/ptrace/unwind.h"

#include <fmt/format.h>

namespace gotap::ptrace {

std::vector<uint64_t> walk_frames(TraceeMemory& mem, const user_regs_struct& regs,
                                  uint64_t ret_addr_slot, int max) {
  std::vector<uint64_t> pcs;
  pcs.push_back(regs.rip);
  uint64_t fp = regs.rbp;
  if (ret_addr_slot) {
    uint64_t ra;
    if (!mem.read(ret_addr_slot, &ra, 8)) return pcs;
    pcs.push_back(ra);
    // Inside a function that has set up its frame, RBP points at its own record, whose
    // return address was just taken from the slot: continue from the caller's record.
    if (fp == ret_addr_slot - 8 && !mem.read(fp, &fp, 8)) return pcs;
  }
  // Frame records are {saved rbp, return address}; the chain goes up the stack.
  uint64_t lo = regs.rsp;
  while (static_cast<int>(pcs.size()) < max + 8 && fp > lo && !(fp & 7)) {
    uint64_t rec[2];
    if (!mem.read(fp, rec, sizeof rec) || rec[1] == 0) break;
    pcs.push_back(rec[1]);
    lo = fp;
    fp = rec[0];
  }
  return pcs;
}

nlohmann::json symbolize(const Pclntab& pcln, uint64_t bias, const std::vector<uint64_t>& pcs,
                         int max) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < pcs.size() && static_cast<int>(out.size()) < max; ++i) {
    // Return addresses point after the call: look up the call instruction itself.
    uint64_t pc = pcs[i] - bias - (i > 0 ? 1 : 0);
    const PclnFunc* f = pcln.find(pc);
    if (!f) {
      out.push_back({{"pc", fmt::format("{:#x}", pcs[i])}, {"func", "?"}});
      continue;
    }
    auto ranges = pcln.inline_ranges(*f);
    auto tree = pcln.inline_tree(*f);
    uint64_t at = pc;
    for (int guard = 0; guard < 64 && static_cast<int>(out.size()) < max; ++guard) {
      int idx = -1;
      for (const auto& r : ranges)
        if (at >= r.lo && at < r.hi) idx = r.index;
      auto fl = pcln.file_line(*f, at);
      nlohmann::json fr = {{"pc", fmt::format("{:#x}", pcs[i])}};
      const InlinedCall* node = nullptr;
      for (const auto& n : tree)
        if (n.index == idx) node = &n;
      fr["func"] = std::string(node ? node->name : f->name);
      if (fl) {
        fr["file"] = std::string(fl->first);
        fr["line"] = fl->second;
      }
      if (node) fr["inlined"] = true;
      out.push_back(std::move(fr));
      if (!node || node->parent_pc == at) break;
      at = node->parent_pc;
    }
  }
  return out;
}

}  // namespace gotap::ptrace
