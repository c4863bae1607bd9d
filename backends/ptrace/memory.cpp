#include "backends/ptrace/memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace gotap::ptrace {

TraceeMemory::TraceeMemory(pid_t pid) : pid_(pid) {
  reopen();
}

void TraceeMemory::reopen() {
  fd_.reset(open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR | O_CLOEXEC));
}

bool TraceeMemory::read(uint64_t addr, void* buf, size_t n) {
  if (n == 0) return true;
  if (addr + n < addr) return false;
  iovec local{buf, n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  ssize_t r = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (r == static_cast<ssize_t>(n)) return true;
  // process_vm_readv refuses pages without read permission; /proc/PID/mem does not.
  if (!fd_) return false;
  return pread(fd_.get(), buf, n, static_cast<off_t>(addr)) == static_cast<ssize_t>(n);
}

bool TraceeMemory::write_fast(uint64_t addr, const void* buf, size_t n) {
  iovec local{const_cast<void*>(buf), n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  if (process_vm_writev(pid_, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n)) return true;
  return write(addr, buf, n);
}

bool TraceeMemory::write(uint64_t addr, const void* buf, size_t n) {
  if (!fd_) return false;
  return pwrite(fd_.get(), buf, n, static_cast<off_t>(addr)) == static_cast<ssize_t>(n);
}

void SnapshotReader::add(uint64_t lo, uint64_t hi) {
  if (hi <= lo || hi - lo > (1ull << 30)) return;
  std::vector<uint8_t> bytes(hi - lo);
  if (live_.read(lo, bytes.data(), bytes.size())) ranges_.emplace_back(lo, std::move(bytes));
}

bool SnapshotReader::read(uint64_t addr, void* buf, size_t n) {
  for (const auto& [lo, bytes] : ranges_)
    if (addr >= lo && addr - lo <= bytes.size() && n <= bytes.size() - (addr - lo)) {
      std::memcpy(buf, bytes.data() + (addr - lo), n);
      return true;
    }
  return live_.read(addr, buf, n);
}

}  // namespace gotap::ptrace
