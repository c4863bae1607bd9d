// Names of code in the files a process maps beside the planned one. With a library as the
// target (-p PID --binary libgo.so), a goroutine's creator or a caller is code of the
// executable, which the plan does not know: its name comes from that file's own ELF symbols
// (gccgo's in Go's spelling), each file read once, when a pc first falls in it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/plan/gccgo_binary.h"

namespace gotap {

class MappedNames {
 public:
  // Reads the executable's names now, while the process lives: its events may be named
  // after it exited (a goroutine's creator, drained from the ring at the end).
  explicit MappedNames(int pid);
  // The Go function of pid that holds pc, in any executable mapping of a file; "" when none
  // is known (an anonymous mapping, a file without symbols, or a C function).
  std::string name(uint64_t pc);

 private:
  struct File {
    uint64_t start = 0, end = 0;  // the executable mapping
    uint64_t bias = 0;            // run-time minus link-time addresses
    std::vector<GccgoFunc> funcs;
  };
  const File* file_of(uint64_t pc);
  int pid_;
  std::mutex mu_;  // the backends name pcs from more than one thread
  std::vector<File> files_;
  std::vector<std::pair<uint64_t, uint64_t>> unnamed_;  // mappings looked at, without names
};

}  // namespace gotap
