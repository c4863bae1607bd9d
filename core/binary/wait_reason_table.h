// runtime.waitReasonStrings read from the binary itself, for releases gotap has no table of
// (core/model/wait_reasons.cpp). The array is a `[N]string` in the data segment: found by
// its symbol when there is one, else (stripped) by the string headers of its first entries
// ("GC assist marking", "IO wait"), whose bytes the linker keeps once in rodata.
#pragma once

#include <string>
#include <vector>

#include "core/binary/elf_file.h"

namespace gotap {

// The names indexed by waitReason, or empty when the array cannot be found or does not look
// like one. Never throws; bounded work on hostile input.
std::vector<std::string> read_wait_reason_table(const ElfFile& elf);

}  // namespace gotap
