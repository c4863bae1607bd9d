#include "backends/ptrace/memory.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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

size_t TraceeMemory::read_blocks(const uint64_t* addrs, size_t size, void* out, size_t n) {
  if (size == 0) return n;
  // One system call for up to IOV_MAX blocks: a sparse map's tables are read without a call
  // each (issue 35). The kernel stops at the first block it cannot read; that one is tried
  // alone (read() falls back to /proc/PID/mem), and the rest go on in a batch.
  constexpr size_t kIovMax = 1024;
  std::array<iovec, kIovMax> remote;
  size_t done = 0;
  while (done < n) {
    const size_t k = std::min(kIovMax, n - done);
    for (size_t i = 0; i < k; ++i) remote[i] = {reinterpret_cast<void*>(addrs[done + i]), size};
    auto* at = static_cast<uint8_t*>(out) + done * size;
    iovec local{at, k * size};
    const ssize_t r = process_vm_readv(pid_, &local, 1, remote.data(), k, 0);
    const size_t got = r > 0 ? static_cast<size_t>(r) / size : 0;
    done += got;
    if (got == k) continue;
    if (!read(addrs[done], static_cast<uint8_t*>(out) + done * size, size)) return done;
    ++done;
  }
  return n;
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
  if (hi > lo) ranges_.emplace_back(lo, hi);
}

bool SnapshotReader::read(uint64_t addr, void* buf, size_t n) {
  const uint64_t base = addr & ~(kChunk - 1);
  if (n == 0 || addr + n < addr || addr + n > base + kChunk) return live_.read(addr, buf, n);
  const std::pair<uint64_t, uint64_t>* range = nullptr;
  for (const auto& r : ranges_)
    if (addr >= r.first && addr + n <= r.second) range = &r;
  if (!range) return live_.read(addr, buf, n);
  const uint64_t lo = std::max(base, range->first), hi = std::min(base + kChunk, range->second);
  Chunk* c = nullptr;
  for (Chunk& k : chunks_)
    if (k.lo == lo && k.hi == hi) c = &k;
  if (!c) {
    if (chunks_.size() < max_chunks_) {
      c = &chunks_.emplace_back();
    } else {
      c = &*std::min_element(chunks_.begin(), chunks_.end(),
                             [](const Chunk& a, const Chunk& b) { return a.used < b.used; });
    }
    c->lo = lo;
    c->hi = hi;
    c->bytes.resize(hi - lo);
    c->ok = live_.read(lo, c->bytes.data(), c->bytes.size());
    ++loads_;
  }
  c->used = ++tick_;
  if (!c->ok) return live_.read(addr, buf, n);
  std::memcpy(buf, c->bytes.data() + (addr - lo), n);
  return true;
}

}  // namespace gotap::ptrace
