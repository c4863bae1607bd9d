// The two mappings the trampoline backend adds to a program, both within rel32 reach of its
// image (placed as the ptrace backend's scratch room is, scratch_room.h):
// - the trampolines: private, read and execute; written through /proc/PID/mem;
// - the counters right after them: shared anonymous memory, read and write, which gotap maps
//   too (through /proc/PID/map_files). gotap reads the counts without a system call, while
//   the program runs detached, and still has them after the program has exited, so that the
//   counts of its last moments are not lost.
// A forked child shares the counters (a Go program's fork runs no Go function before its
// exec); an exec drops both.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "backends/ptrace/process.h"
#include "core/model/result.h"

namespace gotap::trampoline {

class ProgramPages {
 public:
  ProgramPages() = default;
  ProgramPages(const ProgramPages&) = delete;
  ProgramPages& operator=(const ProgramPages&) = delete;
  ~ProgramPages();

  // Maps both into the program through its stopped thread `tid` (a system call injected at
  // `syscall_at` when there is no stub room) and gotap's view of the counters.
  Result<void> map(ptrace::Process& proc, pid_t tid, uint64_t syscall_at, uint64_t image_lo,
                   uint64_t image_hi, uint64_t code_size, uint64_t counter_size);
  // The same at an address from `base` to `hi` (a short stack check's window, jump_site.h),
  // the lowest that is free; an error when none is.
  Result<void> map_at(ptrace::Process& proc, pid_t tid, uint64_t syscall_at, uint64_t base,
                      uint64_t hi, uint64_t code_size, uint64_t counter_size);
  // Unmaps both from the program (through stopped thread `tid`). gotap's view stays.
  bool unmap(ptrace::Process& proc, pid_t tid, uint64_t syscall_at);

  uint64_t code() const { return code_; }
  uint64_t code_size() const { return code_size_; }
  uint64_t counters() const { return counters_; }
  // gotap's view of the counters (and a timed run's ring after them), which writable()
  // before the mapping makes read and write: the ring's tail is gotap's to move.
  void writable() { writable_ = true; }
  uint8_t* view() const { return static_cast<uint8_t*>(view_); }
  // Counter i as the program last wrote it.
  uint64_t count(size_t i, uint64_t stride) const;

 private:
  // Both mappings at `hint`; false when it is taken. An error when injecting fails.
  Result<bool> try_map(ptrace::Process& proc, pid_t tid, uint64_t syscall_at, uint64_t hint,
                       uint64_t code_size, uint64_t counter_size);
  Result<void> open_view(ptrace::Process& proc, pid_t tid, uint64_t syscall_at);
  uint64_t code_ = 0, code_size_ = 0, counters_ = 0, counter_size_ = 0;
  void* view_ = nullptr;
  bool writable_ = false;
};

}  // namespace gotap::trampoline
