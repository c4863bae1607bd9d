// Go build information: the Go version and the main module, from the buildinfo blob, with
// fallbacks for binaries that have none (the runtime's version string in rodata, or the
// DWARF producer). Layout: Go's src/debug/buildinfo/buildinfo.go.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/model/go_version.h"
#include "core/model/result.h"

namespace gotap {

struct BuildInfo {
  GoVersion version;           // unknown (major 0) only when no source had it
  std::string version_source;  // "buildinfo", "runtime.buildVersion" or "rodata"
  std::string module_path;     // "path" line, e.g. "example.com/cmd/app"
  std::string main_module;     // "mod" line: path and version
  std::vector<std::pair<std::string, std::string>> settings;  // "build k=v" lines
  std::vector<std::string> deps;                              // "dep" lines: "path version"

  std::string setting(const std::string& key) const;  // "" when absent
};

// BadInput error only when the file is not a Go binary at all (no buildinfo and no version
// string anywhere).
Result<BuildInfo> read_buildinfo(const ElfFile& elf);

// Parses a modinfo string (the part after the version); public for tests and fuzzing.
void parse_modinfo(std::string_view modinfo, BuildInfo& out);

}  // namespace gotap
