// A read-only view of an ELF file: sections, program headers and symbols, read with libelf.
// It works without section headers (some production binaries have none): every lookup by
// virtual address goes through the PT_LOAD segments first.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/result.h"
#include "core/sys/fd.h"

struct Elf;  // libelf

namespace gotap {

using Bytes = std::span<const uint8_t>;

struct ElfSection {
  std::string name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct ElfSegment {
  uint32_t type = 0;
  uint32_t flags = 0;  // PF_R / PF_W / PF_X
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
  uint64_t align = 0;
};

struct ElfSymbol {
  std::string name;
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t type = 0;  // STT_*
};

class ElfFile {
 public:
  // Opens and maps a file. Errors are BadInput: no such file, not ELF, not x86-64, truncated.
  static Result<std::unique_ptr<ElfFile>> open(const std::string& path);
  // Parses bytes already in memory (fuzzing, tests). The bytes are copied.
  static Result<std::unique_ptr<ElfFile>> from_bytes(Bytes bytes, std::string name = "<memory>");

  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  const std::string& path() const { return path_; }
  // The descriptor open() mapped the file through, kept open for the object's life: the
  // very file that was read, whatever its path names later (-1 for from_bytes). The eBPF
  // backend attaches its uprobes through it (/proc/self/fd/N), so they can only go into
  // the file the plan was made from.
  int fd() const { return fd_.get(); }
  // The device and inode of the file opened (its fstat): what a process must map for a plan
  // of this file to be its (core/plan/image_identity.h). Zeros for bytes parsed from memory.
  uint64_t dev() const { return dev_; }
  uint64_t ino() const { return ino_; }
  uint16_t type() const { return type_; }  // ET_EXEC, ET_DYN
  bool is_pie() const;
  uint64_t entry() const { return entry_; }

  const std::vector<ElfSection>& sections() const { return sections_; }
  const std::vector<ElfSegment>& segments() const { return segments_; }
  const ElfSection* section(std::string_view name) const;
  // The PT_LOAD segment of lowest address: what a process's load bias is measured against.
  const ElfSegment* first_load() const;
  // The file bytes of a section; empty for SHT_NOBITS or out-of-bounds sections.
  Bytes section_data(const ElfSection& s) const;

  // The file-backed bytes starting at vaddr, up to the end of its segment (or section when
  // there are no program headers). Empty when vaddr is not backed by file bytes.
  Bytes at_vaddr(uint64_t vaddr) const;
  // Exactly len bytes at vaddr, or empty when not all of them are file-backed.
  Bytes read(uint64_t vaddr, uint64_t len) const;
  std::optional<uint64_t> read_u64(uint64_t vaddr) const;
  std::optional<uint32_t> read_u32(uint64_t vaddr) const;
  // Gives the memory of the whole pages inside [vaddr, vaddr + len) back to the system, for
  // bytes read once (a whole binary's code, decoded: tens of MB of resident memory): read
  // again later, they come from the file again. Only for bytes never written in the mapping;
  // nothing for a copy held in memory.
  void release(uint64_t vaddr, uint64_t len) const;
  // The file offset of a virtual address, when file-backed.
  std::optional<uint64_t> vaddr_to_offset(uint64_t vaddr) const;

  // .symtab symbols (empty when stripped), sorted by name for lookup.
  const std::vector<ElfSymbol>& symbols() const { return symbols_; }
  const ElfSymbol* symbol(std::string_view name) const;
  bool has_symtab() const { return has_symtab_; }

  Bytes bytes() const { return {data_, size_}; }
  // The libelf handle, for libdw. Owned by this object.
  ::Elf* elf() const { return elf_; }

 private:
  ElfFile() = default;
  Result<void> load();

  std::string path_;
  sys::Fd fd_;
  uint64_t dev_ = 0, ino_ = 0;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* map_ = nullptr;         // mmap'ed file, or
  std::vector<uint8_t> owned_;  // an owned copy
  ::Elf* elf_ = nullptr;
  uint16_t type_ = 0;
  uint64_t entry_ = 0;
  std::vector<ElfSection> sections_;
  std::vector<ElfSegment> segments_;
  std::vector<ElfSymbol> symbols_;
  bool has_symtab_ = false;
};

// Little-endian readers over bounded spans; nullopt when out of bounds.
inline std::optional<uint64_t> le64(Bytes b, uint64_t off) {
  if (off > b.size() || b.size() - off < 8) return std::nullopt;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[off + i];
  return v;
}
inline std::optional<uint32_t> le32(Bytes b, uint64_t off) {
  if (off > b.size() || b.size() - off < 4) return std::nullopt;
  return uint32_t(b[off]) | uint32_t(b[off + 1]) << 8 | uint32_t(b[off + 2]) << 16 |
         uint32_t(b[off + 3]) << 24;
}
inline std::optional<uint16_t> le16(Bytes b, uint64_t off) {
  if (off > b.size() || b.size() - off < 2) return std::nullopt;
  return uint16_t(b[off] | b[off + 1] << 8);
}

}  // namespace gotap
