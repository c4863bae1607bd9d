// ElfFile on files that claim absurd header counts: refused with one line, not walked.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/binary/elf_file.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

std::vector<uint8_t> some_executable() {
  for (const Fixture& f : all_fixtures("basic")) {
    std::string b = read_file(f.path);
    if (b.size() > 2000000) return {b.begin(), b.end()};
  }
  return {};
}

// fuzz_elf found a 2.8 MB file claiming 32,747 program headers: each lookup walked them all,
// and reading the file took minutes.
TEST(ElfFile, ThousandsOfProgramHeadersAreRefused) {
  std::vector<uint8_t> b = some_executable();
  if (b.empty()) GTEST_SKIP() << "no basic fixture over 2 MB (tests/tools/build-fixtures.sh)";
  ASSERT_TRUE(ElfFile::from_bytes({b.data(), b.size()}).ok());
  const uint16_t phnum = 32747;  // at e_phoff 64, 56 bytes each: within the file
  std::memcpy(b.data() + 0x38, &phnum, 2);
  auto elf = ElfFile::from_bytes({b.data(), b.size()});
  ASSERT_FALSE(elf.ok());
  EXPECT_NE(elf.error().what().find("32747 program headers"), std::string::npos)
      << elf.error().what();
}

TEST(ElfFile, ThousandsOfSectionHeadersAreRefused) {
  std::vector<uint8_t> b = some_executable();
  if (b.empty()) GTEST_SKIP() << "no basic fixture over 2 MB (tests/tools/build-fixtures.sh)";
  // Section headers moved to offset 64 (64 bytes each, all within the file), 30,000 of them.
  const uint64_t shoff = 64;
  const uint16_t shnum = 30000, shstrndx = 0;
  std::memcpy(b.data() + 0x28, &shoff, 8);
  std::memcpy(b.data() + 0x3c, &shnum, 2);
  std::memcpy(b.data() + 0x3e, &shstrndx, 2);
  auto elf = ElfFile::from_bytes({b.data(), b.size()});
  ASSERT_FALSE(elf.ok());
  EXPECT_NE(elf.error().what().find("30000 section headers"), std::string::npos)
      << elf.error().what();
}

}  // namespace
}  // namespace gotap::testing
