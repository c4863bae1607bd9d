// Access to a tracee's memory: reads with process_vm_readv (one syscall, no stop needed),
// writes through /proc/PID/mem (which may write read-only text: breakpoints, scratch code).
#pragma once

#include <sys/types.h>

#include <cstdint>

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

}  // namespace gotap::ptrace
