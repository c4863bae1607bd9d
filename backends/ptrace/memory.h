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
  size_t read_blocks(const uint64_t* addrs, size_t size, void* out, size_t n) override;
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

// Copies of ranges of the tracee's memory, each read with one system call: placing probes
// reads the instruction at each of a whole binary's sites (caddy: 145,589), one system call
// apiece otherwise. A range is copied a chunk (64 KiB) at a time, when a read first reaches
// the chunk, and at most `max_chunks` chunks are kept (the least recently used goes): the
// sites come function by function, close to each other, so that a whole binary's text (17
// MB for caddy) is read about once without being held all at once. A read outside the
// ranges, across two chunks or in a chunk that cannot be read whole goes to `live`.
class SnapshotReader : public MemoryReader {
 public:
  static constexpr uint64_t kChunk = 64 * 1024;
  explicit SnapshotReader(MemoryReader& live, size_t max_chunks = 64)
      : live_(live), max_chunks_(max_chunks) {}
  // Reads in [lo, hi) are served from copies.
  void add(uint64_t lo, uint64_t hi);
  bool read(uint64_t addr, void* buf, size_t n) override;
  uint64_t loads() const { return loads_; }  // chunks read from the tracee

 private:
  struct Chunk {
    uint64_t lo = 0, hi = 0;  // what it copies
    uint64_t used = 0;        // when it was last read
    bool ok = false;          // read whole
    std::vector<uint8_t> bytes;
  };
  MemoryReader& live_;
  size_t max_chunks_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
  std::vector<Chunk> chunks_;
  uint64_t tick_ = 0, loads_ = 0;
};

}  // namespace gotap::ptrace
