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

}  // namespace gotap::ptrace
