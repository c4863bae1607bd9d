// The proof, for the eBPF and ptrace backends, that a process maps the file a plan was made from
// (core/plan/planned_image.h): by the file's identity (device and inode), not its path or
// its bytes, at the load bias the kernel chose (checked against sys::load_bias, which
// test_sys.cpp checks against AT_ENTRY). No root needed: the process is our own child.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/binary/elf_file.h"
#include "core/plan/planned_image.h"
#include "core/sys/proc_maps.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;

TEST(PlannedImage, ProvenOnlyForTheFileTheProcessRuns) {
  std::vector<Fixture> fxs;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.flavour == "default" || f.flavour == "pie") fxs.push_back(f);
  if (fxs.empty()) GTEST_SKIP() << "no latency fixtures built";
  const std::string newest = fxs.back().go_version;
  for (const Fixture& f : fxs) {
    if (f.go_version != newest) continue;
    SCOPED_TRACE(f.label());
    auto elf = ElfFile::open(f.path);
    ASSERT_TRUE(elf) << elf.error().what();
    auto img = PlannedImage::of(**elf);
    ASSERT_TRUE(img) << img.error().what();
    // The attach path is the planned inode.
    struct stat want {
    }, got{};
    ASSERT_EQ(stat(f.path.c_str(), &want), 0);
    ASSERT_EQ(stat(img->attach_path.c_str(), &got), 0) << img->attach_path;
    EXPECT_EQ(got.st_ino, want.st_ino);
    EXPECT_EQ(got.st_dev, want.st_dev);

    // A copy: the same bytes in another file.
    const fs::path copy = fs::temp_directory_path() / ("gotap-planned-" + std::to_string(getpid()));
    fs::copy_file(f.path, copy, fs::copy_options::overwrite_existing);
    auto other = ElfFile::open(copy.string());
    ASSERT_TRUE(other);
    auto other_img = PlannedImage::of(**other);
    ASSERT_TRUE(other_img);

    Child p = spawn({f.path, "park", "1", "100000"});
    ASSERT_GT(p.pid, 0);
    const std::string exe = "/proc/" + std::to_string(p.pid) + "/exe";
    const ElfSegment* first = (*elf)->first_load();
    ASSERT_NE(first, nullptr);
    // The kernel points /proc/PID/exe at the new file before it writes the new image's
    // auxiliary vector (execve's begin_new_exec, then create_elf_tables): the truth is read
    // once both are there.
    std::optional<uint64_t> truth;
    for (int i = 0; i < 500 && !truth; ++i) {
      std::error_code ec;
      if (fs::read_symlink(exe, ec) == f.path) {
        if (auto b = sys::load_bias(p.pid, first->vaddr, first->offset)) truth = *b;
      }
      if (!truth) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(truth);
    const auto bias = proven_bias(**elf, *img, p.pid);
    EXPECT_EQ(bias, truth);
    if (f.flavour == "default") {
      EXPECT_EQ(bias, uint64_t{0});
    }
    EXPECT_FALSE(proven_bias(**other, *other_img, p.pid)) << "a copy is another file";

    kill(p.pid, SIGKILL);
    waitpid(p.pid, nullptr, 0);
    close(p.out);
    close(p.err);
    // Gone: nothing maps it any more.
    EXPECT_FALSE(proven_bias(**elf, *img, p.pid));
    fs::remove(copy);
  }
}

}  // namespace
}  // namespace gotap::testing
