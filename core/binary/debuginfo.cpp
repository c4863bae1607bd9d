#include "core/binary/debuginfo.h"

#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

namespace gotap {

namespace {

namespace fs = std::filesystem;

// Where libdebuginfod keeps what it fetched (its documented default and override).
std::string debuginfod_cache() {
  if (const char* p = getenv("DEBUGINFOD_CACHE_PATH"); p && *p) return p;
  if (const char* x = getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/debuginfod_client";
  if (const char* h = getenv("HOME"); h && *h) return std::string(h) + "/.cache/debuginfod_client";
  return "";
}

// The debuglink's file name, read with libdwelf.
std::optional<std::string> debuglink_of(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  elf_version(EV_CURRENT);
  Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  std::optional<std::string> out;
  if (e) {
    GElf_Word crc = 0;
    if (const char* name = dwelf_elf_gnu_debuglink(e, &crc)) out = name;
    elf_end(e);
  }
  close(fd);
  return out;
}

bool has_build_id_path(const std::string& found) {
  return found.find("/.build-id/") != std::string::npos;
}

}  // namespace

std::optional<DebugFile> find_debug_file(const std::string& path,
                                         const std::vector<std::string>& extra_dirs) {
  // "" is the binary's own directory, ".debug" its .debug/; absolute entries are roots.
  std::string search = ":.debug:/usr/lib/debug";
  for (const auto& d : extra_dirs) search += ":" + fs::absolute(d).string();
  char* search_c = search.data();
  Dwfl_Callbacks cb{};
  cb.find_elf = dwfl_build_id_find_elf;
  cb.find_debuginfo = dwfl_standard_find_debuginfo;
  cb.section_address = dwfl_offline_section_address;
  cb.debuginfo_path = &search_c;
  std::unique_ptr<Dwfl, void (*)(Dwfl*)> dwfl(dwfl_begin(&cb), &dwfl_end);
  if (!dwfl) return std::nullopt;
  Dwfl_Module* mod = dwfl_report_offline(dwfl.get(), "main", path.c_str(), -1);
  dwfl_report_end(dwfl.get(), nullptr, nullptr);
  std::optional<DebugFile> out;
  if (mod) {
    Dwarf_Addr bias = 0;
    // Runs the search: debuglink, build ID, then debuginfod when DEBUGINFOD_URLS is set.
    if (dwfl_module_getdwarf(mod, &bias)) {
      const char* mainfile = nullptr;
      const char* debugfile = nullptr;
      dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, &debugfile);
      std::string found = debugfile ? debugfile : "";
      // elfutils 0.188 does not name a file that debuginfod gave it: it is in the client's
      // cache, under the build ID.
      const unsigned char* bits = nullptr;
      GElf_Addr vaddr = 0;
      int n = dwfl_module_build_id(mod, &bits, &vaddr);
      if (found.empty() && n > 0 && !debuginfod_cache().empty()) {
        std::string hex;
        for (int i = 0; i < n; ++i) hex += fmt::format("{:02x}", bits[i]);
        std::string cached = debuginfod_cache() + "/" + hex + "/debuginfo";
        std::error_code ec;
        if (fs::is_regular_file(cached, ec)) found = cached;
      }
      if (!found.empty() && (!mainfile || found != mainfile)) {
        found = fs::absolute(found).lexically_normal().string();
        std::string cache = debuginfod_cache();
        std::string how = !cache.empty() && found.rfind(cache, 0) == 0 ? "debuginfod"
                          : has_build_id_path(found)                   ? "build-id"
                                                                       : "debuglink";
        out = DebugFile{found, how};
      }
    }
  }
  if (out) return out;
  // A flat directory of debug files, named as the debuglink says.
  if (auto link = debuglink_of(path))
    for (const auto& d : extra_dirs) {
      fs::path p = fs::path(d) / *link;
      std::error_code ec;
      if (fs::is_regular_file(p, ec) && fs::canonical(p, ec) != fs::canonical(path, ec))
        return DebugFile{p.string(), "debuglink"};
    }
  return std::nullopt;
}

}  // namespace gotap
