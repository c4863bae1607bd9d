#include "core/binary/debuginfo.h"

#include <arpa/inet.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <libelf.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

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

// Host and port of an http(s) URL: "http://h:8002/x" -> {"h", "8002"}; IPv6 in brackets.
std::optional<std::pair<std::string, std::string>> host_port(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return std::nullopt;
  std::string proto = url.substr(0, scheme);
  std::string rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  if (size_t at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  std::string host = rest, port = proto == "https" ? "443" : "80";
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos) return std::nullopt;
    host = rest.substr(1, close - 1);
    if (close + 1 < rest.size() && rest[close + 1] == ':') port = rest.substr(close + 2);
  } else if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty() || port.empty()) return std::nullopt;
  return std::make_pair(host, port);
}

// Why a TCP connection to host:port fails within two seconds, or "" when it succeeds.
std::string connect_problem(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return gai_strerror(rc);
  std::string problem = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, 2000);
      if (rc == 0) {
        errno = ETIMEDOUT;
        rc = -1;
      } else if (rc > 0) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err ? -1 : 0;
      }
    }
    if (rc == 0)
      problem.clear();
    else
      problem = std::strerror(errno);
    close(fd);
    if (problem.empty()) break;
  }
  freeaddrinfo(res);
  return problem;
}

}  // namespace

std::vector<std::string> unreachable_debuginfod_servers() {
  std::vector<std::string> out;
  const char* urls = getenv("DEBUGINFOD_URLS");
  if (!urls) return out;
  std::istringstream in(urls);
  std::string url;
  while (in >> url) {
    auto hp = host_port(url);
    std::string problem = hp ? connect_problem(hp->first, hp->second) : "not an http(s) URL";
    if (!problem.empty()) out.push_back(url + " does not answer (" + problem + ")");
  }
  return out;
}

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
