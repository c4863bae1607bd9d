// Separate debug information, where distributions put it (docs/design.md, "Types on
// stripped binaries"): a binary without DWARF may have it in a file found through its
// `.gnu_debuglink` (next to it, in its `.debug/`, under /usr/lib/debug), through its GNU
// build ID (/usr/lib/debug/.build-id/xx/yyyy.debug), or from a debuginfod server named by
// DEBUGINFOD_URLS. elfutils' libdwfl does the standard search; gotap adds directories.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gotap {

struct DebugFile {
  std::string path;
  // "debuglink", "build-id" or "debuginfod": how it was found.
  std::string found_by;
};

// The separate debug file of the ELF file at `path`, or nullopt. `extra_dirs` are searched
// like /usr/lib/debug (DIR/.build-id/xx/yyyy.debug, DIR/<the binary's directory>/<link>), and
// also for the debuglink's name directly in DIR.
std::optional<DebugFile> find_debug_file(const std::string& path,
                                         const std::vector<std::string>& extra_dirs);

// The servers of DEBUGINFOD_URLS that do not accept a connection, each as "URL does not answer
// (reason)". libdebuginfod treats an unreachable server like one without the file, so a search that
// found nothing cannot tell the user why; this is asked only then.
std::vector<std::string> unreachable_debuginfod_servers();

}  // namespace gotap
