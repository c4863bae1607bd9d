// Files gotap writes on request (core/sys/output_file.h), as root in a sticky, world-writable
// directory where another user (nobody) planted links and files: what fs.protected_symlinks
// and fs.protected_regular would enforce holds whatever those sysctls say. The truth is the
// file system: targets untouched, nothing created, modes and owners as stat(2) reports them.
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/output/record.h"
#include "core/sys/output_file.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;

// A 1777 directory (as /tmp), a 0700 one only root may enter (as /root), and nobody's uid.
class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: files and links are given to nobody";
    const passwd* pw = ::getpwnam("nobody");
    nobody_ = pw ? pw->pw_uid : 65534;
    std::string t = (fs::temp_directory_path() / "gotap-output-file.XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    base_ = t;
    sticky_ = base_ / "tmp";
    secret_ = base_ / "root-only";
    ASSERT_EQ(::mkdir(sticky_.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(sticky_.c_str(), 01777), 0);
    ASSERT_EQ(::mkdir(secret_.c_str(), 0700), 0);
  }
  void TearDown() override {
    if (!base_.empty()) fs::remove_all(base_);
  }

  // A symlink at `at` pointing to `to`, owned by `uid`.
  void plant_link(const fs::path& to, const fs::path& at, uid_t uid) {
    ASSERT_EQ(::symlink(to.c_str(), at.c_str()), 0);
    ASSERT_EQ(::lchown(at.c_str(), uid, uid), 0);
  }
  void plant_file(const fs::path& at, uid_t uid, mode_t mode, const std::string& text) {
    int fd = ::open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, text.data(), text.size()), ssize_t(text.size()));
    ASSERT_EQ(::fchown(fd, uid, uid), 0);
    ASSERT_EQ(::fchmod(fd, mode), 0);
    ::close(fd);
  }
  static struct stat stat_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st;
  }

  uid_t nobody_ = 65534;
  fs::path base_, sticky_, secret_;
};

TEST_F(OutputFile, PlantedLinkToARootOnlyFileIsRefusedAndTheTargetUntouched) {
  const fs::path target = secret_ / "keep";
  plant_file(target, 0, 0600, "root's data\n");
  plant_link(target, sticky_ / "out", nobody_);
  auto r = sys::open_output_file((sticky_ / "out").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("link"), std::string::npos) << r.error().what();
  EXPECT_EQ(read_file(target.string()), "root's data\n");
  EXPECT_EQ(stat_of(target).st_mode & 07777, 0600u);
}

TEST_F(OutputFile, PlantedDanglingLinkIsRefusedAndNothingIsCreated) {
  plant_link(secret_ / "new", sticky_ / "out", nobody_);
  auto r = sys::open_output_file((sticky_ / "out").string());
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(secret_ / "new")));
  EXPECT_TRUE(fs::is_empty(secret_));
}

TEST_F(OutputFile, PlantedLinkToADirectoryOnTheWayIsRefused) {
  plant_link(secret_, sticky_ / "dir", nobody_);
  auto r = sys::open_output_file((sticky_ / "dir" / "out").string());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(fs::is_empty(secret_));
}

TEST_F(OutputFile, AnotherUsersFileIsRefusedAndKeepsItsContent) {
  const fs::path f = sticky_ / "out";
  plant_file(f, nobody_, 0666, "nobody's\n");
  auto r = sys::open_output_file(f.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("another user"), std::string::npos) << r.error().what();
  EXPECT_EQ(read_file(f.string()), "nobody's\n");
  EXPECT_EQ(stat_of(f).st_uid, nobody_);
}

TEST_F(OutputFile, AHardLinkToRootsFileIsRefused) {
  const fs::path target = secret_ / "keep";
  plant_file(target, 0, 0600, "root's data\n");
  ASSERT_EQ(::link(target.c_str(), (sticky_ / "out").c_str()), 0);
  EXPECT_FALSE(sys::open_output_file((sticky_ / "out").string()).ok());
  EXPECT_EQ(read_file(target.string()), "root's data\n");
}

TEST_F(OutputFile, OwnExistingFileIsEmptiedAndBecomes0600) {
  const fs::path f = sticky_ / "out";
  plant_file(f, 0, 0644, "old content\n");
  auto r = sys::open_output_file(f.string());
  ASSERT_TRUE(r.ok()) << r.error().what();
  ASSERT_EQ(::write(r->get(), "new\n", 4), 4);
  EXPECT_EQ(read_file(f.string()), "new\n");
  EXPECT_EQ(stat_of(f).st_mode & 07777, 0600u);
  EXPECT_EQ(stat_of(f).st_uid, 0u);
}

TEST_F(OutputFile, NewFileIs0600AndCreatedExclusively) {
  const fs::path f = sticky_ / "new";
  const mode_t old = ::umask(0);  // the mode must not depend on the umask
  auto r = sys::open_output_file(f.string());
  ::umask(old);
  ASSERT_TRUE(r.ok()) << r.error().what();
  const struct stat st = stat_of(f);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  // The descriptor is the file created: O_CREAT|O_EXCL, not a file that was there.
  struct stat by_fd {};
  ASSERT_EQ(::fstat(r->get(), &by_fd), 0);
  EXPECT_EQ(by_fd.st_ino, st.st_ino);
  EXPECT_EQ(::fcntl(r->get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
}

TEST_F(OutputFile, DevNullAndOwnLinksAndFifosAreWritten) {
  auto null = sys::open_output_file("/dev/null");
  ASSERT_TRUE(null.ok()) << null.error().what();
  // A link of the user's own is theirs to point, to a file of theirs.
  plant_file(sticky_ / "real", 0, 0644, "x");
  plant_link(sticky_ / "real", sticky_ / "mine", 0);
  auto own = sys::open_output_file((sticky_ / "mine").string());
  ASSERT_TRUE(own.ok()) << own.error().what();
  EXPECT_EQ(read_file((sticky_ / "real").string()), "");
  // A FIFO of the user's (read end open, so that opening it does not wait).
  const fs::path fifo = sticky_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  auto f = sys::open_output_file(fifo.string());
  EXPECT_TRUE(f.ok()) << f.error().what();
  ::close(rd);
  // Nobody's FIFO in the sticky directory is refused (protected_fifos).
  const fs::path theirs = sticky_ / "their-fifo";
  ASSERT_EQ(::mkfifo(theirs.c_str(), 0666), 0);
  ASSERT_EQ(::chown(theirs.c_str(), nobody_, nobody_), 0);
  int their_rd = ::open(theirs.c_str(), O_RDONLY | O_NONBLOCK);  // a refusal, never a wait
  ASSERT_GE(their_rd, 0);
  EXPECT_FALSE(sys::open_output_file(theirs.string()).ok());
  ::close(their_rd);
  EXPECT_FALSE(sys::open_output_file(sticky_.string() + "/").ok());
  EXPECT_FALSE(sys::open_output_file(sticky_.string()).ok());
}

// The gotap binary, end to end: `report -o` and `trace --record` into a planted link exit 2
// with one line, before anything is traced, and the link's target keeps its bytes.
TEST_F(OutputFile, GotapRefusesAPlantedLinkBeforeTracing) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const fs::path target = secret_ / "keep";
  plant_file(target, 0, 0600, "root's data\n");
  plant_link(target, sticky_ / "out", nobody_);
  const fs::path rec = base_ / "empty.rec";
  plant_file(rec, 0, 0600,
             "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":" +
                 std::to_string(kRecordVersion) + "}\n");
  auto r = run_command({gotap_binary(), "report", "-o", (sticky_ / "out").string(), rec.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("gotap: cannot write ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(read_file(target.string()), "root's data\n");

  auto fx = all_fixtures("basic");
  if (fx.empty()) return;  // the report run above covers the writer
  auto t = run_command({gotap_binary(), "trace", "--backend", "ptrace", "--record",
                        (sticky_ / "out").string(), "main.main", "--", fx.back().path},
                       60);
  EXPECT_EQ(t.exit_code, 2) << t.err;
  EXPECT_EQ(t.err.rfind("gotap: cannot write ", 0), 0u) << t.err;
  EXPECT_EQ(t.out, "") << "the program ran";  // basic prints its ground truth when it runs
  EXPECT_EQ(read_file(target.string()), "root's data\n");
}

}  // namespace
}  // namespace gotap::testing
