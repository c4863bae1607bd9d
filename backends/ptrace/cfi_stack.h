// --stack N on a gccgo program (ptrace): gccgo omits frame pointers and has no pclntab, so
// its frames are walked with the call frame information of each file the process maps
// (.eh_frame, which gcc always emits, libgo's __morestack included: a split stack's frames
// lead back to the segment before). elfutils' unwinder does the walk, reading memory and the
// hit's registers through gotap; the frames are named in Go's spelling (MappedNames), C code
// by its ELF symbol, and given a file and line where DWARF has them.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/binary/rtype.h"
#include "core/plan/mapped_names.h"

struct Dwfl;

namespace gotap::ptrace {

class CfiStack {
 public:
  // The files pid maps are reported when a stack is first asked for; mem reads its memory.
  CfiStack(pid_t pid, MemoryReader& mem);
  ~CfiStack();
  CfiStack(const CfiStack&) = delete;
  CfiStack& operator=(const CfiStack&) = delete;

  // The frames of thread tid, stopped at `regs` (rip: the probed instruction): at most max,
  // innermost first, as docs/json.md's "stack" ({"pc","func","file","line"}). The walk ends
  // early where a frame has no call frame information; empty when not even the first could
  // be read.
  nlohmann::json frames(pid_t tid, const user_regs_struct& regs, int max);

  // The walk's pcs alone: pcs[0] the probed instruction, the others return addresses.
  std::vector<uint64_t> walk(pid_t tid, const user_regs_struct& regs, int max);

 private:
  bool attach();
  pid_t pid_;
  MemoryReader& mem_;
  Dwfl* dwfl_ = nullptr;
  bool tried_ = false;
  MappedNames names_;
  // The thread being walked: the unwinder's callbacks read them.
  pid_t tid_ = 0;
  user_regs_struct regs_{};
  bool handed_ = false;  // next_thread gave tid_ already
  friend struct CfiCallbacks;
};

}  // namespace gotap::ptrace
