#include "core/plan/planned_image.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/plan/image_identity.h"
#include "core/sys/proc_maps.h"

namespace gotap {

namespace {

constexpr uint64_t kPageMask = ~uint64_t{0xfff};

bool same_file(const sys::Mapping& m, const PlannedImage& img) {
  return m.inode == img.inode && m.dev == img.dev;
}

}  // namespace

Result<PlannedImage> PlannedImage::of(const ElfFile& elf) {
  if (elf.fd() < 0) return make_error("{} was not read from a file", elf.path());
  PlannedImage img;
  img.attach_path = "/proc/self/fd/" + std::to_string(elf.fd());
  // Device and inode as the kernel prints them for any mapping of the file: gotap's own
  // mapping of it is printed by the same code as the target's, whatever the file system
  // (an overlay's inode numbers differ between stat and the maps).
  const auto at = reinterpret_cast<uint64_t>(elf.bytes().data());
  for (const sys::Mapping& m : sys::read_maps(getpid())) {
    if (at < m.start || at >= m.end || m.inode == 0) continue;
    img.dev = m.dev;
    img.inode = m.inode;
    return img;
  }
  return runtime_error("cannot find gotap's own mapping of {}", elf.path());
}

std::optional<uint64_t> proven_bias(const ElfFile& elf, const PlannedImage& img, int pid) {
  const ElfSegment* first = elf.first_load();
  if (!first) return std::nullopt;
  const std::vector<sys::Mapping> maps = sys::read_maps(pid);
  std::optional<uint64_t> bias;
  for (const sys::Mapping& m : maps) {
    if (!same_file(m, img) || m.offset != (first->offset & kPageMask)) continue;
    const uint64_t linked = first->vaddr & kPageMask;
    if (m.start < linked) return std::nullopt;
    bias = m.start - linked;
    break;
  }
  // ET_EXEC files load where they were linked.
  if (!bias || (!elf.is_pie() && *bias != 0)) return std::nullopt;
  // Every executable segment mapped executable at the same bias: the probes' file offsets
  // are where the process runs them.
  if (!text_mapping_mismatch(elf, maps, *bias, [&](const sys::Mapping& m) {
         return same_file(m, img);
       }).empty())
    return std::nullopt;
  return bias;
}

}  // namespace gotap
