// libFuzzer target: the wait-reason table search on arbitrary ELF bytes.
#include <cstddef>
#include <cstdint>

#include "core/binary/elf_file.h"
#include "core/binary/wait_reason_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto elf = gotap::ElfFile::from_bytes(gotap::Bytes(data, size));
  if (!elf) return 0;
  volatile size_t n = gotap::read_wait_reason_table(**elf).size();
  (void)n;
  return 0;
}
