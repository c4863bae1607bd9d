#include "tests/unit/fixtures.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace gotap::testing {

std::string fixtures_dir() {
  if (const char* e = std::getenv("GOTAP_FIXTURES_DIR")) return e;
  return GOTAP_FIXTURES_DIR;
}

namespace {

// One program per Go version and flavour, a different one in each (version, flavour) group
// in turn, so that every version, flavour and (with enough groups) program is still read.
// For the sanitizer stage (tests/run.sh): a sweep of every fixture there took up to 11
// minutes a test, and the regular suite reads them all.
std::vector<Fixture> sample(const std::vector<Fixture>& sorted) {
  std::vector<Fixture> out;
  size_t group = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i;
    while (end < sorted.size() && sorted[end].go_version == sorted[i].go_version &&
           sorted[end].flavour == sorted[i].flavour)
      ++end;
    out.push_back(sorted[i + group % (end - i)]);
    ++group;
    i = end;
  }
  return out;
}

}  // namespace

std::vector<Fixture> all_fixtures(const std::string& program) {
  std::vector<Fixture> out;
  std::error_code ec;
  fs::path root = fixtures_dir();
  if (!fs::is_directory(root, ec)) return out;
  // Only <digit...>/<flavour>/<program>: the build's .gocache, .tools, .src and the real/
  // binaries live beside the versions.
  auto hidden = [](const fs::path& p) { return p.filename().string().starts_with('.'); };
  for (const auto& ver : fs::directory_iterator(root, ec)) {
    std::string vname = ver.path().filename().string();
    if (!ver.is_directory() || vname.empty() || !std::isdigit(uint8_t(vname[0]))) continue;
    for (const auto& flav : fs::directory_iterator(ver.path(), ec)) {
      if (!flav.is_directory() || hidden(flav.path())) continue;
      for (const auto& bin : fs::directory_iterator(flav.path(), ec)) {
        if (!bin.is_regular_file() || bin.path().has_extension() || hidden(bin.path())) continue;
        Fixture f{ver.path().filename(), flav.path().filename(), bin.path().filename(),
                  bin.path().string()};
        if (!program.empty() && f.program != program) continue;
        out.push_back(std::move(f));
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Fixture& a, const Fixture& b) { return a.path < b.path; });
  if (program.empty() && std::getenv("GOTAP_TEST_FIXTURE_SAMPLE")) return sample(out);
  return out;
}

std::vector<RealBinary> real_binaries() {
  std::vector<RealBinary> out;
  std::error_code ec;
  fs::path root = fs::path(fixtures_dir()) / "real";
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& dir : fs::directory_iterator(root, ec)) {
    if (!dir.is_directory()) continue;
    for (const auto& bin : fs::directory_iterator(dir.path(), ec)) {
      std::string p = bin.path().string();
      if (!bin.is_regular_file() || bin.path().has_extension() || !file_exists(p + ".gosym.json"))
        continue;
      out.push_back({dir.path().filename(), p});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RealBinary& a, const RealBinary& b) { return a.path < b.path; });
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

}  // namespace gotap::testing

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>

#include <gtest/gtest.h>

#include "core/sys/fd.h"

namespace gotap::testing {

std::string gotap_binary() {
  if (const char* e = std::getenv("GOTAP_BINARY")) return e;
  return GOTAP_BINARY;
}

RunResult run_command(const std::vector<std::string>& argv, int timeout_s) {
  RunResult r;
  sys::Pipe out = sys::make_pipe(), err = sys::make_pipe();
  if (!out.read || !err.read) return r;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out.write.get(), 1);
    dup2(err.write.get(), 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execvp(a[0], a.data());
    _exit(127);
  }
  out.write.reset();
  err.write.reset();
  if (pid < 0) return r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  pollfd fds[2] = {{out.read.get(), POLLIN, 0}, {err.read.get(), POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  deadline - std::chrono::steady_clock::now())
                                  .count());
    if (ms <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, ms) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out : err).read.reset();
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, n);
      }
    }
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
  if (WIFSIGNALED(st)) r.signal = WTERMSIG(st);
  return r;
}

// Every key of `want` is in `got` with an equal value; map entries compare as sets.
void expect_contains(const nlohmann::json& want, const nlohmann::json& got,
                     const std::string& path) {
  if (want.is_object()) {
    ASSERT_TRUE(got.is_object()) << path << ": want " << want << " got " << got;
    for (auto& [k, v] : want.items()) {
      ASSERT_TRUE(got.contains(k)) << path << "." << k << " missing in " << got;
      if (k == "entries" && want.contains("len")) {
        std::multiset<std::string> a, b;
        for (const auto& e : v) a.insert(e.dump());
        for (const auto& e : got[k]) b.insert(e.dump());
        EXPECT_EQ(a, b) << path << ".entries";
        continue;
      }
      expect_contains(v, got[k], path + "." + k);
    }
  } else if (want.is_array()) {
    ASSERT_TRUE(got.is_array() && got.size() == want.size())
        << path << ": " << want << " vs " << got;
    for (size_t i = 0; i < want.size(); ++i)
      expect_contains(want[i], got[i], path + "[" + std::to_string(i) + "]");
  } else if (want.is_number() && got.is_number()) {
    // Go's encoding/json writes 2.0 as 2: compare floats numerically, integers exactly.
    if (want.is_number_integer() && got.is_number_integer())
      EXPECT_EQ(want.dump(), got.dump()) << path;
    else
      EXPECT_EQ(want.get<double>(), got.get<double>()) << path;
  } else {
    EXPECT_EQ(want, got) << path;
  }
}

std::vector<nlohmann::json> events_in(const std::string& text, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  // A line of that kind holds "KIND": the others are not parsed (a trace of 130,000 events
  // read four times over took most of a test's two minutes).
  const std::string quoted = "\"" + kind + "\"";
  for (std::string l; std::getline(in, l);) {
    if (l.empty() || l[0] != '{' || (!kind.empty() && l.find(quoted) == std::string::npos))
      continue;
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("event")) continue;
    if (kind.empty() || j["event"] == kind) out.push_back(std::move(j));
  }
  return out;
}

std::set<std::string> keys_of(const nlohmann::json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

nlohmann::json summary_in(const std::string& text) {
  auto s = events_in(text, "summary");
  return s.empty() ? nlohmann::json() : s.back();
}

bool Fixture::go_at_least(unsigned minor) const {
  unsigned major = 0, m = 0;
  return sscanf(go_version.c_str(), "%u.%u", &major, &m) == 2 && (major > 1 || m >= minor);
}

}  // namespace gotap::testing
