// A killed gotap's pages where this one's short-check trampolines must go. Their places are
// fixed by the file's bytes (patch_set.h), so a second gotap after a SIGKILLed one finds them
// taken by the pages the first left, which its jumps still use. With every thread stopped,
// this gotap takes back every jump into those pages (its own pattern's or not: the text is
// read whole), removes them when no thread can be in them, and maps its own in their place.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "backends/ptrace/memory.h"
#include "backends/trampoline/site_patches.h"
#include "core/binary/elf_file.h"
#include "core/sys/proc_maps.h"

namespace gotap::trampoline {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

// The mappings that overlap [lo, hi) when each is a killed gotap's trampolines (`dead`
// accepts its first trampoline address) or the counters right after them, and no thread of
// `stopped` may return into one (page_release.h); nullopt otherwise. Each of those
// trampolines' counters comes along.
std::optional<Ranges> dead_pages_in(const std::vector<sys::Mapping>& maps,
                                    ptrace::TraceeMemory& mem, uint64_t lo, uint64_t hi,
                                    const std::vector<pid_t>& stopped, const IsOurs& dead);

// Every killed gotap's regions in the program (code and counters), when no thread of
// `stopped` may return into one; nullopt otherwise. A timed run's region of bodies has one
// place: the killed gotap's there may be jumped to from its other region's stubs as well as
// from the text, so all of them go together, the text's jumps into any taken back first.
std::optional<Ranges> every_dead_region(const std::vector<sys::Mapping>& maps,
                                        ptrace::TraceeMemory& mem,
                                        const std::vector<pid_t>& stopped, const IsOurs& dead);

// Puts the file's bytes back at every jump of the program's text (elf's executable
// segments, loaded at `bias`) that goes into `pages`: a one-byte `jmp` (a short check's, a RET
// epilogue's) or a 6-byte jbe's `jno` (trampoline_code.h). How many; `failed` counts the writes
// that did not go through (the pages must then stay).
size_t take_back_jumps_into(ptrace::TraceeMemory& mem, const ElfFile& elf, uint64_t bias,
                            const Ranges& pages, size_t& failed);

}  // namespace gotap::trampoline
