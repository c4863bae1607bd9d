// Separate debug information (core/binary/debuginfo.h): the args program built as distributions
// ship Go programs (tests/tools/build-fixtures.sh, split/VERSION/: DWARF moved to args.debug,
// a .gnu_debuglink and a GNU build ID), for every Go version. Found through its debuglink,
// and through a real debuginfod server on loopback (Debian's), it must give the plan the DWARF
// build gives, and both backends must decode every value the DWARF build decodes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Split {
  std::string version;  // "1.26"
  std::string binary;   // split/VERSION/args
  std::string dwarf;    // VERSION/default/args: the same program with DWARF inside
  std::string build_id;
};

std::vector<Split> split_fixtures() {
  std::vector<Split> out;
  std::error_code ec;
  fs::path root = fs::path(fixtures_dir()) / "split";
  for (const auto& v : fs::directory_iterator(root, ec)) {
    Split s{v.path().filename(), (v.path() / "args").string(),
            (fs::path(fixtures_dir()) / v.path().filename() / "default" / "args").string(), ""};
    std::istringstream(read_file((v.path() / "args.build-id").string())) >> s.build_id;
    if (file_exists(s.binary) && file_exists(s.dwarf) && !s.build_id.empty()) out.push_back(s);
  }
  std::sort(out.begin(), out.end(),
            [](const Split& a, const Split& b) { return a.binary < b.binary; });
  return out;
}

json info(const std::string& bin, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {gotap_binary(), "info", "--json", bin});
  RunResult r = run_command(argv, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

json plan_of(const std::string& bin, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.insert(argv.end(), {gotap_binary(), "funcs", "--json", bin, "main.Acceptance"});
  RunResult r = run_command(argv, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

// What DWARF gives a function: names, types and locations of its parameters.
void expect_same_signature(const json& got, const json& want) {
  ASSERT_TRUE(got.is_object() && want.is_object()) << got << "\n" << want;
  for (const char* list : {"args", "results"}) {
    ASSERT_EQ(got[list].size(), want[list].size()) << list;
    for (size_t i = 0; i < got[list].size(); ++i) {
      EXPECT_EQ(got[list][i]["name"], want[list][i]["name"]);
      EXPECT_EQ(got[list][i]["type"], want[list][i]["type"]);
      EXPECT_EQ(got[list][i]["loc"], want[list][i]["loc"]);
    }
  }
  EXPECT_EQ(want["signature"], "dwarf");
  EXPECT_EQ(got["signature"], "debuginfo");
}

class Debuginfo : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    splits_ = split_fixtures();
    if (splits_.empty()) GTEST_SKIP() << "no split-debug fixtures (tests/tools/build-fixtures.sh)";
  }
  std::vector<Split> splits_;
};

TEST_F(Debuginfo, FoundThroughTheDebuglink) {
  for (const auto& s : splits_) {
    SCOPED_TRACE(s.binary);
    json i = info(s.binary);
    EXPECT_EQ(i["dwarf"], true);
    EXPECT_EQ(i["dwarf_source"], "debuglink");
    EXPECT_EQ(fs::canonical(i.value("debug_file", "")), fs::canonical(s.binary + ".debug"));
    expect_same_signature(plan_of(s.binary), plan_of(s.dwarf));
    // And not without it.
    RunResult r = run_command({gotap_binary(), "info", "--json", "--no-debuginfo", s.binary});
    EXPECT_EQ(json::parse(r.out, nullptr, false)["dwarf_source"], "none") << r.out;
  }
}

// Debian's debuginfod serves the debug files by build ID on loopback; the binary, copied
// away from its debug file, finds it there and nowhere else.
TEST_F(Debuginfo, FoundThroughDebuginfod) {
  const std::string server = "/usr/bin/debuginfod";
  if (!file_exists(server)) GTEST_SKIP() << "Debian's debuginfod is not installed";
  fs::path tmp = fs::temp_directory_path() / ("gotap-dbgd-" + std::to_string(getpid()));
  fs::create_directories(tmp / "debug");
  fs::create_directories(tmp / "bin");
  for (const auto& s : splits_)
    fs::copy_file(s.binary + ".debug", tmp / "debug" / ("args-" + s.version + ".debug"));
  int port = free_port();
  Child srv = spawn({server, "-F", (tmp / "debug").string(), "-p", std::to_string(port), "-d",
                     (tmp / "index.sqlite").string(), "-L"});
  ASSERT_GT(srv.pid, 0);
  // It indexes the directory at start: wait until it serves the last build ID.
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    auto r = http_get(port, "/buildid/" + splits_.back().build_id + "/debuginfo");
    up = r && r->rfind("HTTP/1.1 200", 0) == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(up) << "debuginfod did not serve the debug files";
  const std::vector<std::string> env = {"DEBUGINFOD_URLS=http://127.0.0.1:" + std::to_string(port),
                                        "DEBUGINFOD_CACHE_PATH=" + (tmp / "cache").string()};
  for (const auto& s : splits_) {
    if (!up) break;
    SCOPED_TRACE(s.binary);
    fs::path lone = tmp / "bin" / ("args-" + s.version);
    fs::copy_file(s.binary, lone);
    EXPECT_EQ(info(lone.string())["dwarf_source"], "none");  // no debuginfod: nothing
    json i = info(lone.string(), env);
    EXPECT_EQ(i["dwarf_source"], "debuginfod") << i;
    expect_same_signature(plan_of(lone.string(), env), plan_of(s.dwarf));
  }
  kill(srv.pid, SIGTERM);
  waitpid(srv.pid, nullptr, 0);
  close(srv.out);
  close(srv.err);
  fs::remove_all(tmp);
}

// A DEBUGINFOD_URLS server that does not answer is named once, not passed over in silence:
// without the line, a stripped binary's missing types look like a missing debug file.
TEST_F(Debuginfo, UnreachableServerIsNamed) {
  const Split& s = splits_.front();
  const fs::path tmp = fs::temp_directory_path() / ("gotap-dbgd-down-" + std::to_string(getpid()));
  fs::create_directories(tmp);
  fs::path lone = tmp / "args";
  fs::copy_file(s.binary, lone, fs::copy_options::overwrite_existing);
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  const std::string url = "http://127.0.0.1:1";
  for (const char* cmd : {"info", "funcs"}) {
    SCOPED_TRACE(cmd);
    RunResult r = run_command(
        {"/usr/bin/env", "DEBUGINFOD_URLS=" + url,
         "DEBUGINFOD_CACHE_PATH=" + (tmp / "cache").string(), gotap_binary(), cmd, lone.string()},
        60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string line = "gotap: warning: debuginfod server " + url + " does not answer";
    EXPECT_NE(r.err.find(line), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(line), r.err.rfind(line)) << "said more than once:\n" << r.err;
  }
  // A binary that found nothing with no server set says nothing about servers.
  RunResult quiet = run_command(
      {"/usr/bin/env", "-u", "DEBUGINFOD_URLS", gotap_binary(), "info", lone.string()}, 60);
  EXPECT_EQ(quiet.err.find("debuginfod"), std::string::npos) << quiet.err;
  fs::remove_all(tmp);
}

// Traced, per backend, the split build decodes every value the DWARF build decodes.
TEST_F(Debuginfo, DecodesWhatTheDwarfBuildDecodes) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  auto values = [](const std::string& backend, const std::string& bin) {
    RunResult r = run_command(
        {gotap_binary(), "trace", "--backend", backend, "--json", "main.Acceptance", "--", bin});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<json> out;
    for (const json& j : events_in(r.out)) {
      if (j["event"] == "entry") out.push_back(j["args"]);
      if (j["event"] == "return") out.push_back(j["results"]);
    }
    return out;
  };
  // Addresses (and raw words, which are mostly addresses) differ from run to run; everything
  // else must match.
  auto scrub = [](json v) {
    std::function<void(json&)> go = [&](json& x) {
      if (x.is_object()) {
        if (x.contains("addr")) x["addr"] = "?";
        if (x.contains("raw")) x["raw"] = "?";
        for (auto& [k, e] : x.items()) go(e);
      } else if (x.is_array()) {
        for (auto& e : x) go(e);
      }
    };
    go(v);
    return v;
  };
  for (const char* be : {"ebpf", "ptrace"}) {
    for (const auto& s : splits_) {
      SCOPED_TRACE(std::string(be) + " " + s.binary);
      auto got = values(be, s.binary), want = values(be, s.dwarf);
      ASSERT_EQ(got.size(), 6u);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(scrub(got[k]), scrub(want[k]));
    }
  }
}

}  // namespace
}  // namespace gotap::testing
