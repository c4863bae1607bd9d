// Writing the int3s a page at a time (site_bytes.h): every site gets its byte, nothing else
// changes, and a page holding another tracer's int3 is written one site at a time, so that
// an int3 removed meanwhile is never put back. First on a simulated text, then for real, in
// a child process's text through /proc/PID/mem.
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ptrace/memory.h"
#include "backends/ptrace/site_bytes.h"
#include "core/binary/elf_file.h"

namespace gotap::ptrace {
namespace {

constexpr uint64_t kBase = 0x400000;
constexpr uint64_t kPage = 4096;

// A text of `pages` pages, its file, and the writes made to it.
struct FakeText : MemoryReader {
  explicit FakeText(size_t pages, unsigned seed) : mem(pages * kPage) {
    std::mt19937 rng(seed);
    // No 0xCC in the file: any int3 is someone's.
    for (auto& b : mem) b = uint8_t(rng() % 0xCB);
    file = mem;
  }
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr < kBase || addr - kBase + n > mem.size()) return false;
    std::memcpy(buf, mem.data() + (addr - kBase), n);
    return true;
  }
  WriteBytes writer() {
    return [this](uint64_t addr, const uint8_t* b, size_t n) {
      if (before_write) before_write(addr, n);
      if (addr < kBase || addr - kBase + n > mem.size() || fail_at.count(addr)) return false;
      std::memcpy(mem.data() + (addr - kBase), b, n);
      ++writes;
      return true;
    };
  }
  FileText file_text() const {
    return [this](uint64_t addr, size_t n) -> std::span<const uint8_t> {
      if (addr < kBase || addr - kBase + n > file.size()) return {};
      return std::span<const uint8_t>(file).subspan(addr - kBase, n);
    };
  }
  std::vector<uint8_t> mem, file;
  std::set<uint64_t> fail_at;
  std::function<void(uint64_t, size_t)> before_write;
  size_t writes = 0;
};

// `per_page[i]` sites in page i, at random distinct offsets, sorted.
std::vector<Site> sites_in(const FakeText& t, const std::vector<int>& per_page, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Site> sites;
  for (size_t p = 0; p < per_page.size(); ++p) {
    std::set<uint64_t> offs;
    while (offs.size() < size_t(per_page[p])) offs.insert(rng() % kPage);
    for (uint64_t off : offs) {
      Site s;
      s.addr = kBase + p * kPage + off;
      s.orig[0] = t.file[p * kPage + off];
      sites.push_back(s);
    }
  }
  return sites;
}

TEST(SiteBytes, EachPageIsOneWriteAndOnlyTheSitesChange) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    FakeText t(6, seed);
    // A page with one site, an empty one, both ends of a page.
    std::vector<Site> sites = sites_in(t, {40, 1, 0, 2, 300, 7}, seed);
    sites.insert(sites.begin() + 41, Site{});
    sites[41].addr = kBase + kPage + kPage - 1;  // the last byte of page 1, beside its one site
    sites[41].orig[0] = t.file[2 * kPage - 1];
    std::sort(sites.begin(), sites.end(), [](auto& a, auto& b) { return a.addr < b.addr; });
    sites.erase(
        std::unique(sites.begin(), sites.end(), [](auto& a, auto& b) { return a.addr == b.addr; }),
        sites.end());
    std::set<uint64_t> at;
    std::map<uint64_t, int> in_page;
    for (const Site& s : sites) {
      at.insert(s.addr);
      ++in_page[s.addr / kPage];
    }
    // Pages 0, 3, 4, 5, and 1 unless its random site was its last byte: one write each.
    const size_t whole =
        std::count_if(in_page.begin(), in_page.end(), [](const auto& kv) { return kv.second > 1; });
    ASSERT_GE(whole, 4u);

    SiteWriteStats st;
    ASSERT_EQ(write_site_bytes(sites, true, t, t.writer(), t.file_text(), &st), sites.size());
    for (size_t off = 0; off < t.mem.size(); ++off)
      ASSERT_EQ(t.mem[off], at.count(kBase + off) ? 0xCC : t.file[off]) << "offset " << off;
    EXPECT_EQ(st.spans, whole);
    EXPECT_EQ(st.alone, whole == 4 ? 1u : 0u);
    EXPECT_EQ(t.writes, st.spans + st.alone);

    st = {};
    ASSERT_EQ(write_site_bytes(sites, false, t, t.writer(), t.file_text(), &st), sites.size());
    EXPECT_EQ(t.mem, t.file);
    EXPECT_EQ(st.spans, whole);
  }
}

TEST(SiteBytes, WithoutTheFileEverySiteIsWrittenAlone) {
  FakeText t(2, 3);
  std::vector<Site> sites = sites_in(t, {10, 10}, 3);
  SiteWriteStats st;
  ASSERT_EQ(write_site_bytes(sites, true, t, t.writer(), {}, &st), sites.size());
  EXPECT_EQ(st.spans, 0u);
  EXPECT_EQ(st.alone, 20u);
  for (const Site& s : sites) EXPECT_EQ(t.mem[s.addr - kBase], 0xCC);
}

// Another tracer's int3 between two of ours: the page is written a site at a time. The
// tracer removes its int3 after gotap has read the page: a page written whole would put the
// int3 back, and the program would die of it.
TEST(SiteBytes, AnotherTracersInt3RemovedMeanwhileIsNotPutBack) {
  for (bool int3 : {true, false}) {
    FakeText t(3, 7);
    std::vector<Site> sites = sites_in(t, {30, 30, 30}, 7);
    // Between page 1's first two sites.
    const uint64_t theirs = sites[30].addr + 1;
    ASSERT_LT(theirs, sites[31].addr);
    if (!int3)  // restoring: ours are in place
      for (const Site& s : sites) t.mem[s.addr - kBase] = 0xCC;
    t.mem[theirs - kBase] = 0xCC;
    bool removed = false;
    t.before_write = [&](uint64_t addr, size_t) {
      if (!removed && addr >= kBase + kPage) {
        t.mem[theirs - kBase] = t.file[theirs - kBase];
        removed = true;
      }
    };
    SiteWriteStats st;
    ASSERT_EQ(write_site_bytes(sites, int3, t, t.writer(), t.file_text(), &st), sites.size());
    EXPECT_TRUE(removed);
    EXPECT_EQ(t.mem[theirs - kBase], t.file[theirs - kBase]) << "their int3 came back";
    EXPECT_EQ(st.spans, 2u);
    EXPECT_EQ(st.alone, 30u);
    for (const Site& s : sites) EXPECT_EQ(t.mem[s.addr - kBase], int3 ? 0xCC : s.orig[0]);
  }
}

// Their int3 stays while gotap's come and go, and ours go back around it.
TEST(SiteBytes, AnotherTracersInt3StaysThroughInsertAndRestore) {
  FakeText t(2, 11);
  std::vector<Site> sites = sites_in(t, {50, 50}, 11);
  const uint64_t theirs = sites[60].addr + 1;
  ASSERT_LT(theirs, sites[61].addr);
  t.mem[theirs - kBase] = 0xCC;
  ASSERT_EQ(write_site_bytes(sites, true, t, t.writer(), t.file_text()), sites.size());
  EXPECT_EQ(t.mem[theirs - kBase], 0xCC);
  ASSERT_EQ(write_site_bytes(sites, false, t, t.writer(), t.file_text()), sites.size());
  EXPECT_EQ(t.mem[theirs - kBase], 0xCC);
  t.mem[theirs - kBase] = t.file[theirs - kBase];
  EXPECT_EQ(t.mem, t.file);
}

// A tracer that takes no lock (bpftrace) put its uprobe on one of gotap's sites after gotap
// read it: the kernel would take every hit there, so no int3 of gotap's goes over it. Writing
// stops at that site, says why, and leaves it as the other tracer made it; the sites before
// it are written (the caller puts them back). Whether the site's page is written whole or
// its sites alone.
TEST(SiteBytes, AnInt3PlacedOnASiteSinceItWasReadStopsTheWrite) {
  for (bool with_file : {true, false}) {
    FakeText t(3, 13);
    std::vector<Site> sites = sites_in(t, {10, 10, 10}, 13);
    const Site& taken = sites[14];  // page 1
    t.mem[taken.addr - kBase] = 0xCC;
    SiteWriteStats st;
    const size_t done =
        write_site_bytes(sites, true, t, t.writer(), with_file ? t.file_text() : FileText{}, &st);
    EXPECT_TRUE(st.changed);
    // Page 1 holds a byte that is not the file's: its sites go alone, up to the taken one.
    EXPECT_EQ(done, 14u);
    for (size_t i = 0; i < sites.size(); ++i)
      EXPECT_EQ(t.mem[sites[i].addr - kBase], i <= 14 ? 0xCC : sites[i].orig[0]) << i;
    // A failed write is no such site.
    FakeText u(1, 14);
    std::vector<Site> more = sites_in(u, {4}, 14);
    u.fail_at.insert(more[2].addr);
    SiteWriteStats su;
    EXPECT_EQ(write_site_bytes(more, true, u, u.writer(), {}, &su), 2u);
    EXPECT_FALSE(su.changed);
  }
}

TEST(SiteBytes, StopsAtTheFirstSiteThatCannotBeWritten) {
  FakeText t(3, 5);
  std::vector<Site> sites = sites_in(t, {5, 1, 5}, 5);
  // Page 1's lone site fails: the five before it are written, nothing after it.
  t.fail_at.insert(sites[5].addr);
  EXPECT_EQ(write_site_bytes(sites, true, t, t.writer(), t.file_text()), 5u);
  for (size_t i = 0; i < sites.size(); ++i)
    EXPECT_EQ(t.mem[sites[i].addr - kBase], i < 5 ? 0xCC : sites[i].orig[0]) << i;
  // A page whose whole write fails falls back to its sites, and fails at its first.
  FakeText u(1, 6);
  std::vector<Site> more = sites_in(u, {8}, 6);
  u.fail_at.insert(more[0].addr);
  EXPECT_EQ(write_site_bytes(more, true, u, u.writer(), u.file_text()), 0u);
  EXPECT_EQ(u.mem, u.file);
}

int find_bias(dl_phdr_info* info, size_t, void* out) {
  // The first object is the executable.
  *static_cast<uint64_t*>(out) = info->dlpi_addr;
  return 1;
}

// For real: a child's text (a copy of this test's), written through /proc/PID/mem.
TEST(SiteBytes, ChildTextThroughProcMem) {
  auto elf = ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(elf.ok()) << elf.error().what();
  uint64_t bias = 0;
  dl_iterate_phdr(find_bias, &bias);
  const ElfSegment* text = nullptr;
  for (const auto& seg : (*elf)->segments())
    if (seg.type == PT_LOAD && (seg.flags & PF_X) && seg.filesz >= 4 * kPage) text = &seg;
  ASSERT_NE(text, nullptr);
  // The middle of the text, away from the PLT the child calls pause() through.
  const uint64_t lo = ((text->vaddr + text->filesz / 2) & ~(kPage - 1)) + bias;
  FileText file = [&](uint64_t addr, size_t n) -> std::span<const uint8_t> {
    return addr >= bias ? (*elf)->read(addr - bias, n) : std::span<const uint8_t>{};
  };

  // The child says when it is about to wait, and runs none of this text after it.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    (void)!write(ready[1], "r", 1);
    for (;;) pause();
  }
  close(ready[1]);
  char r = 0;
  ASSERT_EQ(read(ready[0], &r, 1), 1);
  close(ready[0]);
  // Then asleep in pause().
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && line.compare(paren, 3, ") S") == 0) break;
    usleep(1000);
  }
  TraceeMemory mem(child);
  // Sites every 37 bytes over three pages, but not on int3 padding; a debugger's int3 in
  // the middle page.
  std::vector<Site> sites;
  uint64_t theirs = 0;
  for (uint64_t a = lo; a < lo + 3 * kPage; a += 37) {
    Site s;
    s.addr = a;
    ASSERT_TRUE(mem.read(a, s.orig, 1));
    if (s.orig[0] == 0xCC) continue;
    if (!theirs && a >= lo + kPage + 100) {
      uint8_t b = 0;
      ASSERT_TRUE(mem.read(a + 1, &b, 1));
      if (b != 0xCC) {
        theirs = a + 1;
        continue;
      }
    }
    sites.push_back(s);
  }
  ASSERT_NE(theirs, 0u);
  const uint8_t kInt3 = 0xCC;
  ASSERT_TRUE(mem.write(theirs, &kInt3, 1));
  auto expect_text = [&](bool ours) {
    std::vector<uint8_t> now(3 * kPage);
    ASSERT_TRUE(mem.read(lo, now.data(), now.size()));
    std::set<uint64_t> at;
    for (const Site& s : sites) at.insert(s.addr);
    auto want = file(lo, now.size());
    ASSERT_EQ(want.size(), now.size());
    for (size_t off = 0; off < now.size(); ++off) {
      const uint64_t a = lo + off;
      const uint8_t expected = a == theirs || (ours && at.count(a)) ? 0xCC : want[off];
      ASSERT_EQ(now[off], expected) << "at " << std::hex << a;
    }
  };
  const WriteBytes write = [&](uint64_t addr, const uint8_t* b, size_t n) {
    return mem.write(addr, b, n);
  };
  SiteWriteStats st;
  EXPECT_EQ(write_site_bytes(sites, true, mem, write, file, &st), sites.size());
  expect_text(true);
  // Pages 0 and 2 whole; page 1 has their int3.
  EXPECT_EQ(st.spans, 2u);
  EXPECT_GT(st.alone, 50u);
  EXPECT_EQ(write_site_bytes(sites, false, mem, write, file), sites.size());
  expect_text(false);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace gotap::ptrace
