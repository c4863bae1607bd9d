// ElfFile on files that claim absurd header counts: refused with one line, not walked.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// Resident pages of this process (/proc/self/statm's second field).
long resident_pages() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident;
}

// A whole binary's code is decoded once and given back (core/plan/go_binary.cpp): its pages
// leave the resident memory, and read again they hold the same bytes.
TEST(ElfFile, ReleasedCodeLeavesMemoryAndReadsBackTheSame) {
  std::string path;
  for (const Fixture& f : all_fixtures("basic"))
    if (path.empty() || std::filesystem::file_size(f.path) > std::filesystem::file_size(path))
      path = f.path;
  ASSERT_FALSE(path.empty()) << "no basic fixture (tests/tools/build-fixtures.sh)";
  auto elf = ElfFile::open(path);
  ASSERT_TRUE(elf.ok()) << elf.error().what();
  const ElfSection* text = (*elf)->section(".text");
  ASSERT_NE(text, nullptr);
  ASSERT_GT(text->size, 256u * 1024);
  Bytes code = (*elf)->read(text->addr, text->size);
  ASSERT_EQ(code.size(), text->size);
  const std::vector<uint8_t> copy(code.begin(), code.end());  // every page read once
  const long before = resident_pages();
  (*elf)->release(text->addr, text->size);
  const long pages = static_cast<long>(text->size / static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_LT(resident_pages(), before - pages / 2);
  code = (*elf)->read(text->addr, text->size);
  EXPECT_TRUE(std::equal(code.begin(), code.end(), copy.begin(), copy.end()));
  // Out of the file's bytes, or none: nothing happens.
  (*elf)->release(0, 4096);
  (*elf)->release(text->addr, 0);
}

}  // namespace
}  // namespace gotap::testing
