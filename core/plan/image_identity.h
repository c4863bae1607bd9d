// Whether a process runs the very file a plan was made from (issue 35). gotap plans from
// /proc/PID/exe and attaches afterwards: a process that ran exec in between (or a pid reused
// by another program) maps a different file, where the plan's addresses fall in other code,
// mid-instruction or in data. The ptrace backend checks after attaching and before its first
// write, and refuses rather than write a byte.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/binary/rtype.h"

namespace gotap {

class ElfFile;

// "" when pid runs `elf` (the file the plan was made from), loaded at `bias`; otherwise what
// differs, for a message. The proof, as the kernel sees it now:
//   - /proc/PID/exe is the same file: stat's device and inode equal the planned file's;
//   - every executable PT_LOAD's first page at bias is mapped from that device and inode, at
//     the offset the segment has in the file (the maps' "dev inode offset");
//   - the build ID notes (Go's and the linker's) read in the process's memory at bias equal
//     the file's, when the file has them and they lie in a loaded segment.
// A file known only by its bytes (ElfFile::from_bytes) has no device or inode: only the
// notes are compared then. Without a bias (the maps name no mapping of the file where it
// should start) only /proc/PID/exe is compared.
std::string image_mismatch(int pid, const ElfFile& elf, std::optional<uint64_t> bias,
                           MemoryReader& mem);

}  // namespace gotap
