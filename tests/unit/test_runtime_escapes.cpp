// A binary whose DWARF names a parameter and a field with a screen clear (ESC[2J), a bidi
// override (U+202E) and a byte that is not UTF-8: `gotap trace` prints them escaped as Go's
// %q does, on both backends, never raw (issue 35, defect 7; docs/cli.md "Quoting").
#include <elf.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;

// The file bytes of section `name`, as [offset, offset + size).
bool find_section(const std::string& elf, const char* name, size_t& off, size_t& size) {
  if (elf.size() < sizeof(Elf64_Ehdr)) return false;
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  if (eh.e_shoff + size_t{eh.e_shnum} * sizeof(Elf64_Shdr) > elf.size()) return false;
  auto shdr = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  const Elf64_Shdr strtab = shdr(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = shdr(i);
    if (std::strcmp(elf.data() + strtab.sh_offset + sh.sh_name, name) != 0) continue;
    if (sh.sh_flags & SHF_COMPRESSED) return false;
    off = sh.sh_offset, size = sh.sh_size;
    return true;
  }
  return false;
}

// Replaces the one NUL-terminated `from` in [off, off + size) with `to` of the same length.
bool patch_once(std::string& elf, size_t off, size_t size, const std::string& from,
                const std::string& to) {
  const std::string needle = from + std::string(1, '\0');
  const std::string_view sec(elf.data() + off, size);
  const size_t at = sec.find(needle);
  if (at == std::string_view::npos || sec.find(needle, at + 1) != std::string_view::npos)
    return false;
  elf.replace(off + at, from.size(), to);
  return true;
}

// The bytes no terminal should see from a tracee: ESC, U+202E, an invalid byte.
void expect_no_raw_hazards(const std::string& out) {
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_EQ(out.find("\xe2\x80\xae"), std::string::npos) << out;
  EXPECT_EQ(out.find('\xff'), std::string::npos) << out;
}

class Escapes : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    // One Go release is enough: the names go through the same DWARF reader for all.
    for (const auto& f : all_fixtures("demo"))
      if (f.flavour == "default" && (demo_.empty() || f.go_version == "1.24")) demo_ = f.path;
    ASSERT_FALSE(demo_.empty()) << "no demo fixture built in " << fixtures_dir();
    dir_ = fs::temp_directory_path() / ("gotap-escapes-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    // Go compresses its DWARF; objcopy (binutils, as the C toolchain) writes it plain, so
    // that a name can be changed in place, byte for byte.
    bin_ = (dir_ / "demo").string();
    RunResult r =
        run_command({"objcopy", "--decompress-debug-sections", demo_, bin_ + ".plain"}, 120);
    ASSERT_EQ(r.exit_code, 0) << "objcopy: " << r.err;
    std::string elf = read_file(bin_ + ".plain");
    size_t off = 0, size = 0;
    ASSERT_TRUE(find_section(elf, ".debug_info", off, size)) << "no plain .debug_info";
    // main.processOrder(o *Order, taxRate float64): the parameter; and Order's field.
    ASSERT_TRUE(patch_once(elf, off, size, "taxRate", kParam));
    ASSERT_TRUE(patch_once(elf, off, size, "Customer", kField));
    std::ofstream(bin_, std::ios::binary) << elf;
    fs::permissions(bin_, fs::perms::owner_all);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // 7 and 8 bytes, the lengths of the names they replace.
  static inline const std::string kParam = "\x1b[2J\xe2\x80\xae";
  static inline const std::string kField = "\x1b[2J\xff\xe2\x80\xae";
  std::string demo_, bin_;
  fs::path dir_;
};

TEST_P(Escapes, DwarfNamesAreQuoted) {
  RunResult r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "main.processOrder",
                             "main.newOrder", "--", bin_, "-n", "3", "-sleep", "1ms"},
                            120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_no_raw_hazards(r.out);
  expect_no_raw_hazards(r.err);
  // Go's %q of the two names: "\x1b[2J\u202e" and "\x1b[2J\xff\u202e" (the field in the
  // Order newOrder returns: both backends show a struct result).
  EXPECT_NE(r.out.find(R"(, "\x1b[2J\u202e"=)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("\x1b[2J\xff\u202e":"grace")"), std::string::npos) << r.out;
  // funcs, its plan in text, names the parameter the same way.
  r = run_command({gotap_binary(), "funcs", bin_, "main.processOrder"}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_no_raw_hazards(r.out);
  EXPECT_NE(r.out.find(R"("\x1b[2J\u202e")"), std::string::npos) << r.out;
}

// A string value that is not UTF-8: the demo's coupon "TENOFF" (a string constant, 6 bytes)
// made 0xFF, a lone 0xC3 and U+202E. Text shows it as Go's %q does; JSON as docs/json.md
// says (each invalid byte as U+00XX); the condition compares the program's own bytes.
TEST_P(Escapes, InvalidUtf8ValueIsQuotedAsGoDoes) {
  const std::string coupon = "T\xff\xc3\xe2\x80\xae";
  std::string elf = read_file(bin_);
  const size_t at = elf.find("TENOFF");
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(elf.find("TENOFF", at + 1), std::string::npos);
  elf.replace(at, coupon.size(), coupon);
  const std::string bin = bin_ + ".coupon";
  std::ofstream(bin, std::ios::binary) << elf;
  fs::permissions(bin, fs::perms::owner_all);
  // Order 5 is the first with a coupon and an item, so the first to reach main.discount.
  const std::string cond = "coupon == \"" + coupon + "\"";
  RunResult r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--if", cond,
                             "main.discount", "--", bin, "-n", "5", "-sleep", "1ms"},
                            120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_no_raw_hazards(r.out);
  // Go 1.24's fmt.Printf("%q\n", "T\xff\xc3\u202e").
  EXPECT_NE(r.out.find(R"(coupon="T\xff\xc3\u202e")"), std::string::npos) << r.out;
  r = run_command({gotap_binary(), "trace", "--json", "--backend", GetParam(), "--if", cond,
                   "main.discount", "--", bin, "-n", "5", "-sleep", "1ms"},
                  120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // U+00FF, U+00C3, then U+202E as it is (JSON Lines keep non-ASCII as UTF-8).
  const std::string want = "\"value\":\"T\xc3\xbf\xc3\x83\xe2\x80\xae\"";
  size_t entries = 0;
  for (size_t b = 0, nl; (nl = r.out.find('\n', b)) != std::string::npos; b = nl + 1) {
    const std::string line = r.out.substr(b, nl - b);
    if (line.rfind("{", 0) != 0) continue;  // the demo's own output
    auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    if (j.value("event", "") != "entry") continue;
    ++entries;
    EXPECT_NE(line.find(want), std::string::npos) << line;
  }
  EXPECT_EQ(entries, 1u) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, Escapes, ::testing::Values("ptrace", "ebpf"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace gotap::testing
