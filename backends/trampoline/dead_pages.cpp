#include "backends/trampoline/dead_pages.h"

#include <cstring>

#include "backends/ptrace/page_release.h"
#include "backends/trampoline/patch_set.h"
#include "core/plan/jump_site.h"

namespace gotap::trampoline {

namespace {

bool in(const Ranges& r, uint64_t a) {
  for (const auto& [lo, hi] : r)
    if (a >= lo && a < hi) return true;
  return false;
}

int32_t rel_at(const uint8_t* p) {
  int32_t v = 0;
  std::memcpy(&v, p, 4);
  return v;
}

// Mapping i is a killed gotap's trampolines: anonymous code whose header `dead` accepts.
bool dead_code(const std::vector<sys::Mapping>& maps, size_t i, const IsOurs& dead) {
  const sys::Mapping& m = maps[i];
  return m.perms == "r-xp" && m.inode == 0 && m.path.empty() && m.end - m.start > kHeaderSize &&
         dead(m.start + kHeaderSize);
}

// The shared mapping right after code mapping i: its counters.
bool counters_of(const std::vector<sys::Mapping>& maps, size_t i) {
  return i + 1 < maps.size() && maps[i + 1].start == maps[i].end && maps[i + 1].perms == "rw-s";
}

}  // namespace

std::optional<Ranges> every_dead_region(const std::vector<sys::Mapping>& maps,
                                        ptrace::TraceeMemory& mem,
                                        const std::vector<pid_t>& stopped, const IsOurs& dead) {
  Ranges out;
  for (size_t i = 0; i < maps.size(); ++i) {
    const sys::Mapping& m = maps[i];
    if (!dead_code(maps, i, dead)) continue;
    for (pid_t t : stopped)
      if (ptrace::may_return_into(t, mem, m.start, m.end)) return std::nullopt;
    out.emplace_back(m.start, m.end);
    if (counters_of(maps, i)) out.emplace_back(maps[i + 1].start, maps[i + 1].end);
  }
  return out;
}

std::optional<Ranges> dead_pages_in(const std::vector<sys::Mapping>& maps,
                                    ptrace::TraceeMemory& mem, uint64_t lo, uint64_t hi,
                                    const std::vector<pid_t>& stopped, const IsOurs& dead) {
  Ranges out;
  size_t last = SIZE_MAX;  // the last code mapping taken
  for (size_t i = 0; i < maps.size(); ++i) {
    const sys::Mapping& m = maps[i];
    if (m.end <= lo || m.start >= hi || (last != SIZE_MAX && i == last + 1)) continue;
    // A dead region's code, or its counters (whose code may lie below lo).
    size_t code = i;
    if (!dead_code(maps, i, dead)) {
      if (i == 0 || !dead_code(maps, i - 1, dead) || !counters_of(maps, i - 1)) return std::nullopt;
      code = i - 1;
    }
    if (code == last) continue;
    for (pid_t t : stopped)
      if (ptrace::may_return_into(t, mem, maps[code].start, maps[code].end)) return std::nullopt;
    out.emplace_back(maps[code].start, maps[code].end);
    if (counters_of(maps, code)) out.emplace_back(maps[code + 1].start, maps[code + 1].end);
    last = code;
  }
  return out;
}

size_t take_back_jumps_into(ptrace::TraceeMemory& mem, const ElfFile& elf, uint64_t bias,
                            const Ranges& pages, size_t& failed) {
  constexpr size_t kChunk = 1 << 20;
  size_t taken = 0;
  std::vector<uint8_t> live;
  for (const auto& seg : elf.segments()) {
    if (seg.type != 1 /* PT_LOAD */ || !(seg.flags & 1 /* PF_X */)) continue;
    for (uint64_t at = seg.vaddr; at < seg.vaddr + seg.filesz; at += kChunk) {
      // 16 bytes more, for a jump (and the epilogue it is in) that starts at the chunk's end.
      const uint64_t n = std::min<uint64_t>(kChunk + 16, seg.vaddr + seg.filesz - at);
      const Bytes file = elf.read(at, n);
      live.resize(n);
      if (file.size() != n || !mem.read(at + bias, live.data(), n)) {
        ++failed;
        continue;
      }
      for (uint64_t i = 0; i < std::min<uint64_t>(n, kChunk); ++i) {
        if (live[i] == file[i] && live[i] != 0x0f) continue;  // a jno keeps the jbe's 0F
        const uint64_t pc = at + i + bias;
        size_t len = 0;
        uint64_t to = 0;
        const bool epilogue =
            file[i] == 0x48 &&
            ret_epilogue_form(Bytes(&file[i], std::min<uint64_t>(n - i, 16))).has_value();
        if (live[i] == 0xe9 && i + 5 <= n && (file[i + 4] == kShortJbe || epilogue) &&
            std::memcmp(&live[i + 1], &file[i + 1], 4) == 0) {
          len = 1;  // a short check's jump, or a RET epilogue's (any form)
          to = pc + 5 + static_cast<int64_t>(rel_at(&file[i + 1]));
        } else if (live[i] == 0x0f && i + 6 <= n && live[i + 1] == 0x81 && file[i] == 0x0f &&
                   file[i + 1] == 0x86) {
          len = 6;  // a 6-byte jbe's jno
          to = pc + 6 + static_cast<int64_t>(rel_at(&live[i + 2]));
        }
        if (!len || !in(pages, to)) continue;
        if (mem.write(pc, &file[i], len))
          ++taken;
        else
          ++failed;
      }
    }
  }
  return taken;
}

}  // namespace gotap::trampoline
