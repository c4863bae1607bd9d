// How many threads --why keeps kernel time for at once, on either backend: eBPF's why_threads
// (threads running a goroutine with a traced call open) and ptrace's stop_syscalls (threads
// of the program with system calls not yet taken). Preallocated in the kernel: 4,096 entries,
// under 2.4 MB. A thread that finds no room is counted (why_threads_full on eBPF,
// why_syscalls_lost on ptrace), never dropped unseen.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace gotap::why {

inline uint32_t why_threads_max() {
  // Tests fill the map with a few threads instead of 4,097.
  if (const char* e = getenv("GOTAP_TEST_WHY_THREADS")) {
    const long n = strtol(e, nullptr, 10);
    if (n > 0 && n < 4096) return static_cast<uint32_t>(n);
  }
  return 4096;
}

}  // namespace gotap::why
