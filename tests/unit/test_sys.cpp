// core/sys: /proc/PID/maps parsing (malformed lines are skipped, never thrown on), the load
// bias checked against the kernel's own AT_ENTRY for this process and for PIE and non-PIE
// fixtures stopped at their exec, and fork_exec's error reporting.
#include <elf.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/binary/elf_file.h"
#include "core/sys/proc_maps.h"
#include "core/sys/spawn.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

TEST(ProcMaps, ParsesLines) {
  auto m = sys::parse_maps_line(
      "55d0c0a00000-55d0c0a01000 r-xp 00002000 fd:01 1234567                    /tmp/a b "
      "(deleted)");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->start, 0x55d0c0a00000u);
  EXPECT_EQ(m->end, 0x55d0c0a01000u);
  EXPECT_EQ(m->perms, "r-xp");
  EXPECT_EQ(m->offset, 0x2000u);
  EXPECT_EQ(m->dev, "fd:01");
  EXPECT_EQ(m->inode, 1234567u);
  EXPECT_EQ(m->path, "/tmp/a b (deleted)");
  auto anon = sys::parse_maps_line("7f0000000000-7f0000001000 rw-p 00000000 00:00 0 ");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->path, "");
  EXPECT_EQ(anon->inode, 0u);
}

TEST(ProcMaps, SkipsMalformedLines) {
  for (const char* bad :
       {"", "garbage", "zz-10 r-xp 0 00:00 0", "10-zz r-xp 0 00:00 0", "20-10 r-xp 0 00:00 0 /x",
        "10-20 r-xp", "10-20 r-xp 0 0000 0 /x", "10-20 r-xp 0 00:00 x /x", "10-20 rx 0 00:00 0 /x",
        "10-20 r-xp 99999999999999999999 00:00 0 /x"})
    EXPECT_FALSE(sys::parse_maps_line(bad)) << bad;
  EXPECT_TRUE(sys::read_maps(-1).empty());
}

// The bias from the maps equals the one the kernel reports: AT_ENTRY minus e_entry.
std::optional<uint64_t> bias_from_maps(int pid, const ElfFile& elf) {
  const ElfSegment* first = elf.first_load();
  if (!first) return std::nullopt;
  return sys::load_bias(pid, first->vaddr, first->offset);
}

TEST(LoadBias, OfThisProcess) {
  auto elf = ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(elf.ok());
  auto bias = bias_from_maps(getpid(), **elf);
  ASSERT_TRUE(bias);
  EXPECT_EQ(*bias, getauxval(AT_ENTRY) - (*elf)->entry());
  EXPECT_FALSE(sys::load_bias(-1, 0));
}

TEST(EntryPoint, IsTheKernelsAtEntry) {
  EXPECT_EQ(sys::entry_point(getpid()), getauxval(AT_ENTRY));
  EXPECT_FALSE(sys::entry_point(-1));
}

// Every flavour, PIE included, stopped at the exec as the eBPF backend launches it.
TEST(LoadBias, OfFixturesAtTheirExec) {
  auto fixtures = all_fixtures("basic");
  if (fixtures.empty()) GTEST_SKIP() << "no fixtures built";
  int pies = 0;
  for (const Fixture& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok());
    auto child = sys::fork_exec({fx.path}, sys::TraceStop::AtExec);
    ASSERT_TRUE(child.ok()) << child.error().what();
    ASSERT_EQ(child->exec_error(), 0);
    int st = 0;
    ASSERT_EQ(waitpid(child->pid, &st, 0), child->pid);
    ASSERT_TRUE(WIFSTOPPED(st));
    auto bias = bias_from_maps(child->pid, **elf);
    auto entry = sys::entry_point(child->pid);  // checked by EntryPoint.IsTheKernelsAtEntry
    kill(child->pid, SIGKILL);
    ptrace(PTRACE_DETACH, child->pid, nullptr, nullptr);
    waitpid(child->pid, nullptr, 0);
    ASSERT_TRUE(bias && entry);
    EXPECT_EQ(*bias, *entry - (*elf)->entry());
    if ((*elf)->is_pie()) {
      ++pies;
      EXPECT_NE(*bias, 0u);
    } else {
      EXPECT_EQ(*bias, 0u);
    }
  }
  if (fixtures.size() > 1) {
    EXPECT_GT(pies, 0) << "no PIE fixture among them";
  }
}

TEST(Spawn, FindOnPath) {
  EXPECT_EQ(sys::find_on_path("./relative/x"), "./relative/x");
  EXPECT_EQ(sys::find_on_path(""), "");
  EXPECT_EQ(sys::find_on_path("no-such-program-gotap"), "");
  std::string sh = sys::find_on_path("sh");
  EXPECT_FALSE(sh.empty());
  EXPECT_EQ(access(sh.c_str(), X_OK), 0);
}

TEST(Spawn, ReportsExecFailures) {
  auto none = sys::fork_exec({"no-such-program-gotap"}, sys::TraceStop::AtExec);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().errnum, ENOENT);
  EXPECT_FALSE(sys::fork_exec({}, sys::TraceStop::AtExec).ok());
  // A file that exists but cannot run: the child's exec fails and says why.
  auto c = sys::fork_exec({"/dev/null"}, sys::TraceStop::BeforeExec);
  ASSERT_TRUE(c.ok());
  int st = 0;
  ASSERT_EQ(waitpid(c->pid, &st, WUNTRACED), c->pid);
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(c->pid, SIGCONT);
  EXPECT_EQ(c->exec_error(), EACCES);
  ASSERT_EQ(waitpid(c->pid, &st, 0), c->pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 127);
}

}  // namespace
}  // namespace gotap::testing
