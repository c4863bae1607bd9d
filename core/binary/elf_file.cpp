#include "core/binary/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/sys/fd.h"

namespace gotap {

namespace {

bool libelf_ready() {
  static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
  return ok;
}

}  // namespace

Result<std::unique_ptr<ElfFile>> ElfFile::open(const std::string& path) {
  sys::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error(ErrorKind::BadInput, "cannot open {}", path);
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return errno_error(ErrorKind::BadInput, "cannot stat {}", path);
  if (!S_ISREG(st.st_mode)) return make_error("{}: not a regular file", path);
  if (st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr)))
    return make_error("{}: not an ELF file (too short)", path);
  std::unique_ptr<ElfFile> f(new ElfFile());
  f->path_ = path;
  f->dev_ = st.st_dev;
  f->ino_ = st.st_ino;
  // Private and writable so libelf may never write through to the file; pages are only
  // copied if written.
  void* m = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0);
  if (m == MAP_FAILED) return errno_error(ErrorKind::BadInput, "cannot map {}", path);
  f->map_ = m;
  f->data_ = static_cast<const uint8_t*>(m);
  f->size_ = st.st_size;
  f->fd_ = std::move(fd);
  GOTAP_TRY(f->load());
  return f;
}

Result<std::unique_ptr<ElfFile>> ElfFile::from_bytes(Bytes bytes, std::string name) {
  std::unique_ptr<ElfFile> f(new ElfFile());
  f->path_ = std::move(name);
  f->owned_.assign(bytes.begin(), bytes.end());
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  GOTAP_TRY(f->load());
  return f;
}

ElfFile::~ElfFile() {
  if (elf_) elf_end(elf_);
  if (map_) munmap(map_, size_);
}

Result<void> ElfFile::load() {
  if (!libelf_ready()) return make_error("libelf initialisation failed");
  if (size_ < sizeof(Elf64_Ehdr) || std::memcmp(data_, ELFMAG, SELFMAG) != 0)
    return make_error("{}: not an ELF file", path_);
  if (data_[EI_CLASS] != ELFCLASS64 || data_[EI_DATA] != ELFDATA2LSB)
    return make_error("{}: not a 64-bit little-endian ELF file", path_);
  elf_ = elf_memory(reinterpret_cast<char*>(const_cast<uint8_t*>(data_)), size_);
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF)
    return make_error("{}: not an ELF file ({})", path_, elf_errmsg(-1));
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf_, &eh)) return make_error("{}: bad ELF header", path_);
  if (eh.e_machine != EM_X86_64) return make_error("{}: not an x86-64 ELF file", path_);
  type_ = eh.e_type;
  entry_ = eh.e_entry;

  // Real executables have a few dozen program headers and sections. A file that claims
  // thousands is refused: every address lookup walks them (at_vaddr), so tens of thousands
  // would make reading one crafted file take minutes (found by fuzz_elf).
  constexpr size_t kMaxSegments = 1024, kMaxSections = 4096;
  size_t nph = 0;
  if (elf_getphdrnum(elf_, &nph) == 0 && nph > kMaxSegments)
    return make_error("{}: {} program headers, more than an executable has (at most {})", path_,
                      nph, kMaxSegments);
  size_t nsh = 0;
  if (elf_getshdrnum(elf_, &nsh) == 0 && nsh > kMaxSections)
    return make_error("{}: {} section headers, more than an executable has (at most {})", path_,
                      nsh, kMaxSections);
  if (elf_getphdrnum(elf_, &nph) == 0) {
    for (size_t i = 0; i < nph; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf_, static_cast<int>(i), &ph)) continue;
      ElfSegment s{ph.p_type,   ph.p_flags, ph.p_offset, ph.p_vaddr,
                   ph.p_filesz, ph.p_memsz, ph.p_align};
      // A segment whose file bytes lie outside the file is truncated: keep what is there.
      if (s.offset > size_)
        s.filesz = 0;
      else
        s.filesz = std::min<uint64_t>(s.filesz, size_ - s.offset);
      segments_.push_back(s);
    }
  }

  size_t shstrndx = 0;
  bool have_names = elf_getshdrstrndx(elf_, &shstrndx) == 0;
  Elf_Scn* scn = nullptr;
  Elf_Scn* symtab = nullptr;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    ElfSection s;
    const char* n = have_names ? elf_strptr(elf_, shstrndx, sh.sh_name) : nullptr;
    s.name = n ? n : "";
    s.type = sh.sh_type;
    s.flags = sh.sh_flags;
    s.addr = sh.sh_addr;
    s.offset = sh.sh_offset;
    s.size = sh.sh_size;
    sections_.push_back(std::move(s));
    if (sh.sh_type == SHT_SYMTAB) symtab = scn;
  }

  if (symtab) {
    GElf_Shdr sh;
    Elf_Data* d = nullptr;
    if (gelf_getshdr(symtab, &sh) && sh.sh_offset <= size_ && sh.sh_size <= size_ - sh.sh_offset &&
        sh.sh_entsize != 0 && (d = elf_getdata(symtab, nullptr)) != nullptr) {
      has_symtab_ = true;
      size_t n = sh.sh_size / sh.sh_entsize;
      symbols_.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        GElf_Sym sym;
        if (!gelf_getsym(d, static_cast<int>(i), &sym)) break;
        const char* name = elf_strptr(elf_, sh.sh_link, sym.st_name);
        if (!name || !*name) continue;
        symbols_.push_back(
            {name, sym.st_value, sym.st_size, static_cast<uint8_t>(GELF_ST_TYPE(sym.st_info))});
      }
      std::stable_sort(symbols_.begin(), symbols_.end(),
                       [](const ElfSymbol& a, const ElfSymbol& b) { return a.name < b.name; });
    }
  }
  if (segments_.empty() && sections_.empty())
    return make_error("{}: ELF file has neither program nor section headers", path_);
  return {};
}

bool ElfFile::is_pie() const {
  return type_ == ET_DYN;
}

const ElfSegment* ElfFile::first_load() const {
  const ElfSegment* first = nullptr;
  for (const auto& seg : segments_)
    if (seg.type == PT_LOAD && (!first || seg.vaddr < first->vaddr)) first = &seg;
  return first;
}

const ElfSection* ElfFile::section(std::string_view name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

Bytes ElfFile::section_data(const ElfSection& s) const {
  if (s.type == SHT_NOBITS || s.offset > size_ || s.size > size_ - s.offset) return {};
  return {data_ + s.offset, s.size};
}

Bytes ElfFile::at_vaddr(uint64_t vaddr) const {
  for (const auto& s : segments_) {
    if (s.type != PT_LOAD) continue;
    if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) {
      uint64_t off = s.offset + (vaddr - s.vaddr);
      return {data_ + off, s.filesz - (vaddr - s.vaddr)};
    }
  }
  for (const auto& s : sections_) {
    if (!(s.flags & SHF_ALLOC) || s.type == SHT_NOBITS) continue;
    if (vaddr >= s.addr && vaddr - s.addr < s.size) {
      Bytes d = section_data(s);
      if (d.empty()) continue;
      return d.subspan(vaddr - s.addr);
    }
  }
  return {};
}

Bytes ElfFile::read(uint64_t vaddr, uint64_t len) const {
  Bytes b = at_vaddr(vaddr);
  if (b.size() < len) return {};
  return b.first(len);
}

void ElfFile::release(uint64_t vaddr, uint64_t len) const {
  Bytes b = read(vaddr, len);
  if (!map_ || b.empty()) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(b.data()) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(b.data()) + b.size()) & ~(page - 1);
  // MADV_DONTNEED on a private file mapping drops the pages; unwritten, they read back the
  // same from the file.
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

std::optional<uint64_t> ElfFile::read_u64(uint64_t vaddr) const {
  return le64(read(vaddr, 8), 0);
}
std::optional<uint32_t> ElfFile::read_u32(uint64_t vaddr) const {
  return le32(read(vaddr, 4), 0);
}

std::optional<uint64_t> ElfFile::vaddr_to_offset(uint64_t vaddr) const {
  Bytes b = at_vaddr(vaddr);
  if (b.empty()) return std::nullopt;
  return static_cast<uint64_t>(b.data() - data_);
}

const ElfSymbol* ElfFile::symbol(std::string_view name) const {
  auto it = std::lower_bound(symbols_.begin(), symbols_.end(), name,
                             [](const ElfSymbol& s, std::string_view n) { return s.name < n; });
  if (it != symbols_.end() && it->name == name) return &*it;
  return nullptr;
}

}  // namespace gotap
