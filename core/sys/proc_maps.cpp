#include "core/sys/proc_maps.h"

#include <elf.h>
#include <unistd.h>

#include <charconv>
#include <fstream>

namespace gotap::sys {

namespace {

constexpr uint64_t kPageMask = ~uint64_t{0xfff};

// The next space-separated field of `s`, consumed.
std::string_view next_field(std::string_view& s) {
  size_t b = s.find_first_not_of(' ');
  if (b == std::string_view::npos) {
    s = {};
    return {};
  }
  s.remove_prefix(b);
  size_t e = s.find(' ');
  std::string_view f = s.substr(0, e);
  s.remove_prefix(e == std::string_view::npos ? s.size() : e);
  return f;
}

bool parse_hex(std::string_view s, uint64_t& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::optional<Mapping> parse_maps_line(std::string_view line) {
  Mapping m;
  std::string_view range = next_field(line);
  size_t dash = range.find('-');
  if (dash == std::string_view::npos || !parse_hex(range.substr(0, dash), m.start) ||
      !parse_hex(range.substr(dash + 1), m.end) || m.end < m.start)
    return std::nullopt;
  m.perms = next_field(line);
  std::string_view off = next_field(line), dev = next_field(line), inode = next_field(line);
  if (m.perms.size() != 4 || !parse_hex(off, m.offset) || dev.find(':') == std::string_view::npos)
    return std::nullopt;
  m.dev = dev;
  auto [p, ec] = std::from_chars(inode.data(), inode.data() + inode.size(), m.inode);
  if (inode.empty() || ec != std::errc() || p != inode.data() + inode.size()) return std::nullopt;
  // The path is the rest of the line after the padding: it may contain spaces itself.
  size_t b = line.find_first_not_of(' ');
  if (b != std::string_view::npos) m.path = line.substr(b);
  return m;
}

std::vector<Mapping> read_maps(int pid) {
  std::vector<Mapping> out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(f, line);)
    if (auto m = parse_maps_line(line)) out.push_back(std::move(*m));
  return out;
}

std::optional<uint64_t> load_bias(int pid, uint64_t first_load_vaddr, uint64_t first_load_offset) {
  // /proc/PID/exe reads as the maps do, " (deleted)" included, in the reader's namespace.
  char exe[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  ssize_t n = readlink(link.c_str(), exe, sizeof(exe));
  if (n <= 0 || n == static_cast<ssize_t>(sizeof(exe))) return std::nullopt;
  const std::string_view path(exe, static_cast<size_t>(n));
  for (const Mapping& m : read_maps(pid)) {
    if (m.path != path || m.offset != (first_load_offset & kPageMask)) continue;
    const uint64_t linked = first_load_vaddr & kPageMask;
    if (m.start < linked) return std::nullopt;
    return m.start - linked;
  }
  return std::nullopt;
}

std::optional<uint64_t> entry_point(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/auxv", std::ios::binary);
  uint64_t kv[2];
  while (f.read(reinterpret_cast<char*>(kv), sizeof kv)) {
    if (kv[0] == AT_NULL) break;
    if (kv[0] == AT_ENTRY) return kv[1];
  }
  return std::nullopt;
}

}  // namespace gotap::sys
