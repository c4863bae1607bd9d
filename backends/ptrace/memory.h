// Access to a tracee's memory: reads with process_vm_readv (one syscall, no stop needed),
// writes through /proc/PID/mem (which may write read-only text: breakpoints, scratch code).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/binary/rtype.h"
#include "core/sys/fd.h"

namespace gotap::ptrace {

class TraceeMemory : public MemoryReader {
 public:
  explicit TraceeMemory(pid_t pid);
  TraceeMemory(const TraceeMemory&) = delete;
  TraceeMemory& operator=(const TraceeMemory&) = delete;

  bool read(uint64_t addr, void* buf, size_t n) override;
  bool write(uint64_t addr, const void* buf, size_t n);
  // Writes writable memory (the stack) with process_vm_writev; falls back to write().
  bool write_fast(uint64_t addr, const void* buf, size_t n);
  // Reopens /proc/PID/mem, which an exec invalidates.
  void reopen();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
  sys::Fd fd_;
};

// A copy of ranges of the tracee's memory, each read with one system call: placing probes
// reads the instruction at each of a whole binary's sites (caddy: 145,589), one system call
// apiece otherwise. A read outside the copies goes to `live`.
class SnapshotReader : public MemoryReader {
 public:
  explicit SnapshotReader(MemoryReader& live) : live_(live) {}
  // Copies [lo, hi) now; a range that cannot be read whole is left to `live`.
  void add(uint64_t lo, uint64_t hi);
  bool read(uint64_t addr, void* buf, size_t n) override;

 private:
  MemoryReader& live_;
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> ranges_;
};

}  // namespace gotap::ptrace
