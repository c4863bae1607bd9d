#include "core/plan/mapped_names.h"

#include <elf.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/binary/elf_file.h"
#include "core/binary/gccgo_symbols.h"
#include "core/sys/proc_maps.h"

namespace gotap {

MappedNames::MappedNames(int pid) : pid_(pid) {
  // By inode, or by path where a file system's inodes differ between stat and the maps.
  const std::string exe = fmt::format("/proc/{}/exe", pid);
  struct stat st {};
  if (::stat(exe.c_str(), &st) != 0) return;
  std::error_code ec;
  const std::string path = std::filesystem::read_symlink(exe, ec).string();
  for (const sys::Mapping& m : sys::read_maps(pid))
    if ((m.inode == st.st_ino || (!ec && m.path == path)) && m.perms.size() >= 3 &&
        m.perms[2] == 'x')
      file_of(m.start);
}

const MappedNames::File* MappedNames::file_of(uint64_t pc) {
  for (const File& f : files_)
    if (pc >= f.start && pc < f.end) return &f;
  for (auto [lo, hi] : unnamed_)
    if (pc >= lo && pc < hi) return nullptr;
  for (const sys::Mapping& m : sys::read_maps(pid_)) {
    if (pc < m.start || pc >= m.end) continue;
    unnamed_.push_back({m.start, m.end});
    if (m.perms.size() < 3 || m.perms[2] != 'x' || m.inode == 0) return nullptr;
    // The file the process maps, even deleted or replaced since.
    auto elf = ElfFile::open(fmt::format("/proc/{}/map_files/{:x}-{:x}", pid_, m.start, m.end));
    if (!elf) return nullptr;
    // The segment this mapping holds gives the link-time address of its first byte.
    // (A segment's pages start below it when its offset is not page-aligned.)
    constexpr uint64_t kPageMask = ~uint64_t{0xfff};
    for (const auto& seg : (*elf)->segments()) {
      const uint64_t page_off = seg.offset & kPageMask;
      if (seg.type != PT_LOAD || !(seg.flags & PF_X) || m.offset < page_off ||
          m.offset >= seg.offset + seg.filesz)
        continue;
      File f;
      f.start = m.start;
      f.end = m.end;
      f.bias = m.start - ((seg.vaddr & kPageMask) + (m.offset - page_off));
      f.funcs = gccgo_functions(read_function_symbols(**elf));
      if (f.funcs.empty()) return nullptr;
      unnamed_.pop_back();
      files_.push_back(std::move(f));
      return &files_.back();
    }
    return nullptr;
  }
  return nullptr;
}

std::string MappedNames::name(uint64_t pc) {
  std::lock_guard lock(mu_);
  const File* f = file_of(pc);
  return f && pc >= f->bias ? gccgo_func_name(f->funcs, pc - f->bias) : std::string();
}

}  // namespace gotap
