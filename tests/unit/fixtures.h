// Locating the Go fixtures built by tests/tools/build-fixtures.sh:
//   $GOTAP_FIXTURES_DIR/<go version>/<flavour>/<program>     (flavour: default stripped pie cgo)
// with reference dumps from Go's own tools beside each binary:
//   <program>.gosym.json  (debug/gosym + debug/elf: functions, entries, ends)
//   <program>.objdump     (go tool objdump output; only for unstripped flavours: the whole
//                          binary for basic/default, main.* functions elsewhere)
//   <program>.nm          (go tool nm -size -sort address; unstripped flavours)
//   <program>.version     (go version BINARY)
// and real-world stripped Go binaries from tests/tools/fetch-real-binaries.sh:
//   $GOTAP_FIXTURES_DIR/real/<name>/<binary> with <binary>.gosym.json
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gotap::testing {

struct Fixture {
  std::string go_version;  // "1.19", "1.26", ...
  std::string flavour;     // "default", "stripped", "pie", "cgo", "pie-stripped"
  std::string program;     // "basic", "signatures", ...
  std::string path;        // the binary
  std::string label() const { return go_version + "/" + flavour + "/" + program; }
  // Whether it was built by Go 1.`minor` or later.
  bool go_at_least(unsigned minor) const;
};

std::string fixtures_dir();
// Every built fixture binary, optionally only those of one program. Empty when none were
// built: tests then GTEST_SKIP with a reason. With GOTAP_TEST_FIXTURE_SAMPLE set (the
// sanitizer stage), the sweep of every program is one program per Go version and flavour.
std::vector<Fixture> all_fixtures(const std::string& program = "");
struct RealBinary {
  std::string name;  // "esbuild", ...
  std::string path;  // the binary; path + ".gosym.json" is its reference dump
};
// Every fetched real-world binary that has a reference dump; empty when none were fetched.
std::vector<RealBinary> real_binaries();

std::string read_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace gotap::testing

namespace gotap::testing {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out, err;
};

// Runs argv (no shell), capturing stdout and stderr; kills it after timeout_s.
RunResult run_command(const std::vector<std::string>& argv, int timeout_s = 120);
// The gotap binary under test (GOTAP_BINARY env or the build's).
std::string gotap_binary();

// The events in a command's output ({"event":...} lines; other lines, such as a fixture's
// ground truth or plain text, are skipped), optionally only those of one kind.
std::vector<nlohmann::json> events_in(const std::string& text, const std::string& kind = "");
// The keys of a JSON object.
std::set<std::string> keys_of(const nlohmann::json& j);
// The last `summary` event in a command's output, or null.
nlohmann::json summary_in(const std::string& text);

// Every key of `want` is in `got` with an equal value (recursively; extra keys such as "addr"
// are allowed); map entries compare as sets; numbers compare numerically. A gtest failure
// names the path of the first difference.
void expect_contains(const nlohmann::json& want, const nlohmann::json& got,
                     const std::string& path);

}  // namespace gotap::testing
