// The file a plan was made from, held from planning to the end of the trace, and the proof
// that the traced process runs it.
//
// A pid can exec another program (or exit and have its pid reused) between the moment gotap
// reads /proc/PID/exe and the moment its uprobes go in. A uprobe attached by a path that
// resolves at attach time would then land at the plan's offsets in another file: the middle
// of an instruction of another program. Attaching through gotap's own descriptor of the
// planned file (/proc/self/fd/N, which the kernel resolves to that inode) makes the probes
// go into the planned file only. The process is then proven to map that file, executable,
// at a consistent load bias, after the uprobes are registered: a process that exec'd before
// that no longer maps it and is refused; one that execs after keeps no probe in its new
// image (uprobes belong to an inode, and the new image is another one).
//
// The ptrace backend uses the same proof for a library's copy (-p PID --binary LIB): the
// process's executable says nothing of which libgo.so it maps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/model/result.h"

namespace gotap {
class ElfFile;
}

namespace gotap {

struct PlannedImage {
  std::string attach_path;  // /proc/self/fd/N: the planned inode, as the kernel resolves it
  std::string dev;          // its device and inode as /proc/PID/maps print them
  uint64_t inode = 0;

  // The planned file of `elf` (ElfFile::open keeps its descriptor). An error when the file
  // was not opened from disk (ElfFile::from_bytes) or gotap's own mapping of it is not found.
  static Result<PlannedImage> of(const ElfFile& elf);
};

// pid's load bias for the planned file: pid maps `img` executable, where the file's segments
// say it must be (bias 0 unless PIE). nullopt when it does not (it runs another program, or
// no longer exists).
std::optional<uint64_t> proven_bias(const ElfFile& elf, const PlannedImage& img, int pid);

}  // namespace gotap
