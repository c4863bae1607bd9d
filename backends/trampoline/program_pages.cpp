#include "backends/trampoline/program_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "backends/ptrace/scratch_room.h"
#include "core/sys/fd.h"
#include "core/sys/proc_maps.h"

namespace gotap::trampoline {

using ptrace::syscall_failed;

ProgramPages::~ProgramPages() {
  if (view_) ::munmap(view_, counter_size_);
}

Result<bool> ProgramPages::try_map(ptrace::Process& proc, pid_t tid, uint64_t syscall_at,
                                   uint64_t hint, uint64_t code_size, uint64_t counter_size) {
  auto c = proc.inject_syscall(
      tid, syscall_at, SYS_mmap,
      {hint, code_size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
       static_cast<uint64_t>(-1), 0});
  if (!c) return c.error();
  if (syscall_failed(*c)) return false;  // taken
  if (*c != hint) {                      // a kernel before 4.17 takes the address as a hint
    (void)proc.inject_syscall(tid, syscall_at, SYS_munmap, {*c, code_size});
    return false;
  }
  auto k = proc.inject_syscall(
      tid, syscall_at, SYS_mmap,
      {hint + code_size, counter_size, PROT_READ | PROT_WRITE,
       MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, static_cast<uint64_t>(-1), 0});
  if (!k || syscall_failed(*k) || *k != hint + code_size) {
    if (k && !syscall_failed(*k))
      (void)proc.inject_syscall(tid, syscall_at, SYS_munmap, {*k, counter_size});
    (void)proc.inject_syscall(tid, syscall_at, SYS_munmap, {hint, code_size});
    if (!k) return k.error();
    return false;
  }
  // Faulted in writable now, while the threads are held: else the first write to each page
  // of an event ring (8 trace records, 128 timed ones) would fault, in the program's time;
  // MAP_POPULATE maps a shared mapping's pages read-only, which does not spare that fault.
  // A kernel before 5.14 has no MADV_POPULATE_WRITE: the pages then fault as they come.
  constexpr uint64_t kMadvPopulateWrite = 23;
  (void)proc.inject_syscall(tid, syscall_at, SYS_madvise,
                            {hint + code_size, counter_size, kMadvPopulateWrite});
  code_ = hint;
  code_size_ = code_size;
  counters_ = hint + code_size;
  counter_size_ = counter_size;
  return true;
}

Result<void> ProgramPages::map(ptrace::Process& proc, pid_t tid, uint64_t syscall_at,
                               uint64_t image_lo, uint64_t image_hi, uint64_t code_size,
                               uint64_t counter_size) {
  const ptrace::ScratchRoom room = ptrace::ScratchRoom::of(proc.pid(), image_lo, image_hi);
  const uint64_t size = code_size + counter_size;
  for (uint64_t hint : ptrace::scratch_spots(sys::read_maps(proc.pid()), room, size)) {
    auto r = try_map(proc, tid, syscall_at, hint, code_size, counter_size);
    if (!r) return r.error();
    if (*r) return open_view(proc, tid, syscall_at);
  }
  return runtime_error("cannot map {} KiB of trampolines in pid {} within 2 GiB of its image",
                       size / 1024, proc.pid());
}

Result<void> ProgramPages::map_at(ptrace::Process& proc, pid_t tid, uint64_t syscall_at,
                                  uint64_t base, uint64_t hi, uint64_t code_size,
                                  uint64_t counter_size) {
  // One guard page of the scratch room's between tries: no merging with what took a spot.
  const uint64_t step = code_size + counter_size + ptrace::kScratchGuard;
  for (uint64_t at = base; at <= hi; at += step) {
    auto r = try_map(proc, tid, syscall_at, at, code_size, counter_size);
    if (!r) return r.error();
    if (*r) return open_view(proc, tid, syscall_at);
  }
  return runtime_error("{:#x} to {:#x} is taken in pid {}: no room for {} KiB of trampolines", base,
                       hi, proc.pid(), (code_size + counter_size) / 1024);
}

Result<void> ProgramPages::open_view(ptrace::Process& proc, pid_t tid, uint64_t syscall_at) {
  // The same counters in gotap: the program's shared mapping, opened by its range.
  const std::string path =
      fmt::format("/proc/{}/map_files/{:x}-{:x}", proc.pid(), counters_, counters_ + counter_size_);
  sys::Fd fd(::open(path.c_str(), (writable_ ? O_RDWR : O_RDONLY) | O_CLOEXEC));
  void* v = fd ? ::mmap(nullptr, counter_size_, PROT_READ | (writable_ ? PROT_WRITE : 0),
                        MAP_SHARED, fd.get(), 0)
               : MAP_FAILED;
  if (v == MAP_FAILED) {
    const int err = errno;
    unmap(proc, tid, syscall_at);
    return runtime_error("cannot read the counters of pid {} ({}: {})", proc.pid(), path,
                         std::strerror(err));
  }
  view_ = v;
  return {};
}

bool ProgramPages::unmap(ptrace::Process& proc, pid_t tid, uint64_t syscall_at) {
  if (!code_) return true;
  // One call for both mappings, which are adjacent: a gotap killed meanwhile leaves both or
  // neither, never the counters without the code whose header says whose they are (the
  // next gotap could neither take nor use their place).
  auto a = proc.inject_syscall(tid, syscall_at, SYS_munmap, {code_, code_size_ + counter_size_});
  const bool ok = a && !syscall_failed(*a);
  if (ok) code_ = counters_ = 0;
  return ok;
}

uint64_t ProgramPages::count(size_t i, uint64_t stride) const {
  if (!view_ || (i + 1) * stride > counter_size_) return 0;
  // The program adds with `lock inc`; an aligned 8-byte load sees each whole.
  const auto* p = reinterpret_cast<const uint64_t*>(static_cast<const char*>(view_) + i * stride);
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

}  // namespace gotap::trampoline
