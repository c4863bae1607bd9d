#include "backends/ptrace/site_bytes.h"

#include <cstring>
#include <vector>

namespace gotap::ptrace {

namespace {

constexpr uint64_t kPage = 4096;

uint8_t byte_for(const Site& s, bool int3) {
  return int3 ? 0xCC : s.orig[0];
}

// Fills buf with the span [sites.front().addr, sites.back().addr] as it is now, with the
// sites' bytes in place. False when any other byte in it is not the file's, or unreadable.
bool build_span(std::span<const Site> sites, bool int3, MemoryReader& now, const FileText& file,
                std::vector<uint8_t>& buf) {
  const uint64_t lo = sites.front().addr;
  const size_t n = sites.back().addr - lo + 1;
  const std::span<const uint8_t> want = file(lo, n);
  buf.resize(n);
  if (want.size() != n || !now.read(lo, buf.data(), n)) return false;
  // The bytes between two sites must be the file's: else they are someone else's, and the
  // page's other bytes are left alone.
  size_t from = 0;
  for (const Site& s : sites) {
    const size_t off = s.addr - lo;
    if (std::memcmp(buf.data() + from, want.data() + from, off - from) != 0) return false;
    if (int3 && buf[off] != s.orig[0]) return false;  // said by the site's own write
    buf[off] = byte_for(s, int3);
    from = off + 1;
  }
  return true;
}

}  // namespace

size_t write_site_bytes(std::span<const Site> sites, bool int3, MemoryReader& now,
                        const WriteBytes& write, const FileText& file, SiteWriteStats* stats) {
  std::vector<uint8_t> buf;
  SiteWriteStats local;
  SiteWriteStats& st = stats ? *stats : local;
  for (size_t i = 0; i < sites.size();) {
    const uint64_t page = sites[i].addr & ~(kPage - 1);
    size_t j = i + 1;
    while (j < sites.size() && (sites[j].addr & ~(kPage - 1)) == page) ++j;
    const std::span<const Site> group = sites.subspan(i, j - i);
    if (group.size() > 1 && file && build_span(group, int3, now, file, buf) &&
        write(group.front().addr, buf.data(), buf.size())) {
      ++st.spans;
      i = j;
      continue;
    }
    for (; i < j; ++i) {
      uint8_t was = 0;
      if (int3) {
        if (!now.read(sites[i].addr, &was, 1)) return i;
        if (was != sites[i].orig[0]) {
          st.changed = true;
          return i;
        }
      }
      const uint8_t b = byte_for(sites[i], int3);
      if (!write(sites[i].addr, &b, 1)) return i;
      ++st.alone;
    }
  }
  return sites.size();
}

}  // namespace gotap::ptrace
