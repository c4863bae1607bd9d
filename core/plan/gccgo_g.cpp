#include "core/plan/gccgo_g.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/sys/fd.h"

namespace gotap {

namespace {

constexpr std::string_view kGVar = "runtime.g";

// A NUL-terminated name at `off` of a string table; empty when out of bounds.
std::string_view name_at(Bytes strs, uint32_t off) {
  if (off >= strs.size()) return {};
  std::string_view all(reinterpret_cast<const char*>(strs.data()), strs.size());
  size_t end = all.find('\0', off);
  return end == std::string_view::npos ? std::string_view() : all.substr(off, end - off);
}

GccgoG none(std::string why) {
  GccgoG g;
  g.why_not = std::move(why);
  return g;
}

// The executable's TLS block sits right below the thread pointer (x86-64's variant II, the
// first module): at FS base - roundup(memsz - firstbyte, align) - firstbyte, where firstbyte
// keeps the block's alignment offset (glibc's _dl_determine_tlsoffset). The linker puts a
// local-exec variable at the same place.
std::optional<int64_t> exec_tls_offset(const ElfFile& elf, uint64_t sym_value) {
  for (const ElfSegment& s : elf.segments()) {
    if (s.type != PT_TLS) continue;
    const uint64_t align = s.align ? s.align : 1;
    if (align & (align - 1) || s.memsz > (1u << 30) || sym_value >= s.memsz) return std::nullopt;
    const uint64_t firstbyte = (0 - (s.vaddr & (align - 1))) & (align - 1);
    const uint64_t size = s.memsz > firstbyte ? s.memsz - firstbyte : 0;
    const uint64_t off = (size + align - 1) / align * align + firstbyte;
    return int64_t(sym_value) - int64_t(off);
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint32_t> libgo_goid_offset(int gcc_major) {
  // GCC 12's libgo (libgo21): struct g begins _panic, _defer, m, syscallsp, syscallpc,
  // param, atomicstatus (uint32), then goid (int64) at 56 (libgo/go/runtime/runtime2.go).
  if (gcc_major == 12) return 56;
  return std::nullopt;
}

int libgo_gcc_major(std::string_view soname) {
  return soname == "libgo.so.21" ? 12 : 0;
}

std::optional<uint64_t> tls_module_slot(const ElfFile& lib, std::string_view symbol) {
  const ElfSection* dynsym = lib.section(".dynsym");
  const ElfSection* dynstr = lib.section(".dynstr");
  if (!dynsym || !dynstr) return std::nullopt;
  Bytes syms = lib.section_data(*dynsym), strs = lib.section_data(*dynstr);
  for (const ElfSection& s : lib.sections()) {
    if (s.type != SHT_RELA) continue;
    Bytes rela = lib.section_data(s);
    for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= rela.size(); off += sizeof(Elf64_Rela)) {
      const uint64_t info = *le64(rela, off + 8);
      if (ELF64_R_TYPE(info) != R_X86_64_DTPMOD64) continue;
      const uint64_t sym = ELF64_R_SYM(info);
      if (sym >= syms.size() / sizeof(Elf64_Sym)) continue;
      auto name = le32(syms, sym * sizeof(Elf64_Sym));
      if (name && name_at(strs, *name) == symbol) return *le64(rela, off);
    }
  }
  return std::nullopt;
}

GccgoG place_gccgo_g(const ElfFile& elf, const GccgoFacts& facts, int gcc_major) {
  // In libgo.so: the program needs it, or it is libgo.
  const std::string& lib = !facts.libgo.empty() ? facts.libgo : facts.soname;
  if (!lib.empty()) {
    const int major = libgo_gcc_major(lib);
    auto goid = libgo_goid_offset(major);
    if (!goid) return none(fmt::format("gotap does not know the g of {}", lib));
    GccgoG g;
    g.tls = GccgoG::Tls::Module;
    g.libgo = lib;
    g.g_goid = *goid;
    return g;
  }
  auto goid = libgo_goid_offset(gcc_major);
  if (!goid)
    return none(gcc_major ? fmt::format("gotap does not know the g of GCC {}'s libgo", gcc_major)
                          : "the GCC release that built the program is unknown (no DWARF)");
  const ElfSymbol* s = elf.symbol(kGVar);
  if (!s || s->type != STT_TLS) return none("the program names no runtime.g (stripped?)");
  auto off = exec_tls_offset(elf, s->value);
  if (!off) return none("the program's TLS segment does not hold runtime.g");
  GccgoG g;
  g.tls = GccgoG::Tls::Exec;
  g.fs_offset = *off;
  g.g_goid = *goid;
  return g;
}

std::optional<sys::Mapping> library_mapping(int pid, std::string_view soname) {
  // The maps are in address order: the first is the lowest.
  for (auto& m : sys::read_maps(pid)) {
    std::string_view base(m.path);
    if (auto slash = base.rfind('/'); slash != std::string_view::npos)
      base = base.substr(slash + 1);
    if (m.offset == 0 && base.rfind(soname, 0) == 0 &&
        (base.size() == soname.size() || base[soname.size()] == '.'))
      return std::move(m);
  }
  return std::nullopt;
}

Result<std::optional<uint64_t>> libgo_tls_slot_in(const GccgoG& g, int pid) {
  if (g.tls != GccgoG::Tls::Module) return runtime_error("goroutine ids: {}", g.why_not);
  // libgo's mapping of file offset 0: its load bias (a shared object is linked at 0).
  const std::optional<sys::Mapping> first = library_mapping(pid, g.libgo);
  if (!first) return std::optional<uint64_t>();
  auto lib =
      ElfFile::open(fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, first->start, first->end));
  if (!lib) return lib.error();
  const ElfSegment* load = (*lib)->first_load();
  auto slot = tls_module_slot(**lib, kGVar);
  if (!load || !slot) return runtime_error("{} has no TLS relocation of {}", g.libgo, kGVar);
  return std::optional<uint64_t>(first->start - (load->vaddr & ~uint64_t(0xfff)) + *slot);
}

Result<GccgoGAt> read_gccgo_g(const GccgoG& g, int pid, uint64_t slot) {
  sys::Fd mem(open(fmt::format("/proc/{}/mem", pid).c_str(), O_RDONLY | O_CLOEXEC));
  uint64_t pair[2] = {};
  if (!mem || pread(mem.get(), pair, sizeof(pair), off_t(slot)) != sizeof(pair))
    return errno_error(ErrorKind::Runtime, "cannot read {}'s TLS slot in pid {}", g.libgo, pid);
  // ld.so writes the module id when it relocates libgo: 0 before.
  if (pair[0] == 0) return runtime_error("{} is not loaded in pid {} yet", g.libgo, pid);
  GccgoGAt at;
  at.g_goid = g.g_goid;
  at.dtv = true;
  at.modid = pair[0];
  at.dtpoff = pair[1];
  return at;
}

Result<GccgoGAt> locate_gccgo_g(const GccgoG& g, int pid) {
  if (g.tls == GccgoG::Tls::Exec) {
    GccgoGAt at;
    at.g_goid = g.g_goid;
    at.fs_offset = g.fs_offset;
    return at;
  }
  auto slot = libgo_tls_slot_in(g, pid);
  if (!slot) return slot.error();
  if (!*slot) return runtime_error("{} is not loaded in pid {}", g.libgo, pid);
  return read_gccgo_g(g, pid, **slot);
}

}  // namespace gotap
