// Names of code outside the planned file (core/plan/mapped_names.h), in a running gccgo
// program linked against libgo.so: a pc of the executable and one of libgo.so are named as nm
// names their symbols (demangled), at the load bias the process's maps give; code with no
// symbol, or no file, has no name. No root needed: the program is our own child.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/plan/mapped_names.h"
#include "core/sys/proc_maps.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

// The address nm gives a symbol of `file` (dynamic table when `dynamic`); 0 when absent.
uint64_t nm_address(const std::string& file, const std::string& symbol, bool dynamic) {
  std::vector<std::string> argv = {"nm", "--defined-only"};
  if (dynamic) argv.push_back("-D");
  argv.push_back(file);
  RunResult r = run_command(argv);
  std::istringstream lines(r.out);
  for (std::string addr, kind, name; lines >> addr >> kind >> name;)
    if (name == symbol) return std::stoull(addr, nullptr, 16);
  return 0;
}

// Where pid maps offset 0 of the file whose path holds `part` (libgo.so.21 is a link to
// libgo.so.21.0.0, the path the maps show).
uint64_t mapped_at(int pid, const std::string& part) {
  for (const sys::Mapping& m : sys::read_maps(pid))
    if (m.offset == 0 && m.path.find(part) != std::string::npos) return m.start;
  return 0;
}

TEST(MappedNames, NamesTheExecutablesAndLibgosCodeAsTheirSymbols) {
  const std::string prog = std::string(GOTAP_GCCGO_FIXTURES_DIR) + "/default/calls";
  if (!file_exists(prog)) GTEST_SKIP() << "no gccgo fixture " << prog << " (gccgo-12 absent)";
  const std::string libgo = "/usr/lib/x86_64-linux-gnu/libgo.so.21";
  const uint64_t add = nm_address(prog, "main.Add", false);
  const uint64_t atoi = nm_address(libgo, "strconv.Atoi", true);
  ASSERT_NE(add, 0u) << "nm finds no main.Add in " << prog;
  ASSERT_NE(atoi, 0u) << "nm -D finds no strconv.Atoi in " << libgo;
  const std::string go = "/tmp/gotap-mapped-names-" + std::to_string(getpid());
  Child p = spawn({prog, "1", "wait", go});
  ASSERT_GT(p.pid, 0);
  ASSERT_NE(read_until(p.out, "waiting", 30'000).find("waiting"), std::string::npos);
  // Both files are PIE-linked at 0: their first mapping's start is their bias.
  const uint64_t exe_at = mapped_at(p.pid, "/default/calls");
  const uint64_t lib_at = mapped_at(p.pid, "/libgo.so.21");
  MappedNames names(p.pid);
  const std::string in_exe = names.name(exe_at + add + 1);
  const std::string in_lib = names.name(lib_at + atoi + 1);
  const std::string nowhere = names.name(8);
  kill(p.pid, SIGKILL);
  waitpid(p.pid, nullptr, 0);
  close(p.out);
  close(p.err);
  ASSERT_NE(exe_at, 0u);
  ASSERT_NE(lib_at, 0u);
  EXPECT_EQ(in_exe, "main.Add");
  EXPECT_EQ(in_lib, "strconv.Atoi");
  EXPECT_EQ(nowhere, "");
}

}  // namespace
}  // namespace gotap::testing
