#include "core/plan/image_identity.h"

#include <elf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/binary/elf_file.h"
#include "core/sys/proc_maps.h"

namespace gotap {

namespace {

constexpr uint64_t kPageMask = ~uint64_t{0xfff};

std::string dev_ino(uint64_t dev, uint64_t ino) {
  return fmt::format("{}:{}", dev, ino);
}

// A device as the maps print it ("fd:01": major and minor in hex) as stat's st_dev; nullopt
// when it does not parse.
std::optional<uint64_t> maps_dev(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  unsigned major = 0, minor = 0;
  auto a = std::from_chars(s.data(), s.data() + colon, major, 16);
  auto b = std::from_chars(s.data() + colon + 1, s.data() + s.size(), minor, 16);
  if (a.ec != std::errc() || a.ptr != s.data() + colon || b.ec != std::errc() ||
      b.ptr != s.data() + s.size())
    return std::nullopt;
  return makedev(major, minor);
}

}  // namespace

std::string image_mismatch(int pid, const ElfFile& elf, std::optional<uint64_t> load_bias,
                           MemoryReader& mem) {
  const bool known = elf.dev() != 0 || elf.ino() != 0;
  if (known) {
    struct stat st {};
    const std::string exe = "/proc/" + std::to_string(pid) + "/exe";
    if (::stat(exe.c_str(), &st) != 0) return "its executable cannot be read";
    if (uint64_t(st.st_dev) != elf.dev() || uint64_t(st.st_ino) != elf.ino())
      return fmt::format("it runs file {}, not {}", dev_ino(st.st_dev, st.st_ino),
                         dev_ino(elf.dev(), elf.ino()));
  }
  if (!load_bias) return "";
  const uint64_t bias = *load_bias;
  if (known) {
    const std::string differs =
        text_mapping_mismatch(elf, sys::read_maps(pid), bias, [&](const sys::Mapping& m) {
          return maps_dev(m.dev).value_or(0) == elf.dev() && m.inode == elf.ino();
        });
    if (!differs.empty()) return differs;
  }
  for (const char* name : {".note.go.buildid", ".note.gnu.build-id"}) {
    const ElfSection* s = elf.section(name);
    if (!s || !(s->flags & SHF_ALLOC) || s->addr == 0 || s->size == 0 || s->size > 4096) continue;
    Bytes want = elf.section_data(*s);
    if (want.size() != s->size) continue;
    std::vector<uint8_t> got(want.size());
    if (!mem.read(s->addr + bias, got.data(), got.size()))
      return fmt::format("its {} cannot be read at {:#x}", name, s->addr + bias);
    if (std::memcmp(got.data(), want.data(), got.size()) != 0)
      return fmt::format("its {} differs from the planned file's", name);
  }
  return "";
}

std::string text_mapping_mismatch(const ElfFile& elf, const std::vector<sys::Mapping>& maps,
                                  uint64_t bias,
                                  const std::function<bool(const sys::Mapping&)>& same_file) {
  bool any = false;
  for (const ElfSegment& seg : elf.segments()) {
    if (seg.type != PT_LOAD || !(seg.flags & PF_X) || seg.filesz == 0) continue;
    any = true;
    const uint64_t off = seg.offset & kPageMask, at = (seg.vaddr & kPageMask) + bias;
    const sys::Mapping* hit = nullptr;
    for (const sys::Mapping& m : maps)
      if (m.start <= at && at < m.end) hit = &m;
    if (!hit) return fmt::format("nothing is mapped at {:#x}", at);
    const uint64_t got = hit->offset + (at - hit->start);
    if (!same_file(*hit) || got != off)
      return fmt::format("{:#x} maps {} {} at offset {:#x}, not the planned file at {:#x}", at,
                         hit->dev, hit->inode, got, off);
    if (hit->perms.size() < 3 || hit->perms[2] != 'x')
      return fmt::format("{:#x} is mapped {}, not executable", at, hit->perms);
  }
  return any ? "" : "the file has no executable segment";
}

}  // namespace gotap
