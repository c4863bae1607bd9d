// libFuzzer target: read_buildinfo on arbitrary ELF bytes, and parse_modinfo on the raw
// input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/binary/buildinfo.h"
#include "core/binary/elf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gotap::BuildInfo direct;
  gotap::parse_modinfo(std::string_view(reinterpret_cast<const char*>(data), size), direct);
  (void)gotap::GoVersion::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  auto elf = gotap::ElfFile::from_bytes({data, size});
  if (!elf.ok()) return 0;
  auto bi = gotap::read_buildinfo(**elf);
  if (bi.ok()) {
    volatile size_t sink = bi->version.raw.size() + bi->deps.size() + bi->setting("GOOS").size();
    (void)sink;
  }
  return 0;
}
