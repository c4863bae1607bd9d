// Whether a process runs the very file a plan was made from (issue 35). gotap plans from
// /proc/PID/exe and attaches afterwards: a process that ran exec in between (or a pid reused
// by another program) maps a different file, where the plan's addresses fall in other code,
// mid-instruction or in data. The ptrace backend checks after attaching and before its first
// write, and refuses rather than write a byte.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/binary/rtype.h"
#include "core/sys/proc_maps.h"

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

// Whether each executable PT_LOAD of `elf` is mapped executable in `maps`, from the file
// `same_file` accepts, at the offset it has in the file and where `bias` puts it: "" when all
// are (and there is one), otherwise the first that is not, for a message. The part of the
// proof both backends make: ptrace with the device and inode stat gives (image_mismatch),
// eBPF with those the kernel prints for gotap's own mapping of the planned file.
std::string text_mapping_mismatch(const ElfFile& elf, const std::vector<sys::Mapping>& maps,
                                  uint64_t bias,
                                  const std::function<bool(const sys::Mapping&)>& same_file);

}  // namespace gotap
