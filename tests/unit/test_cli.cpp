// The command line's contract for bad input (docs/cli.md): one "gotap: " line on stderr and
// exit code 2, never a crash; and `info` agreeing with Go's own `go version`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;

bool have_gotap() {
  return file_exists(gotap_binary());
}

// Exactly one line, starting with "gotap: ".
void expect_one_error_line(const RunResult& r) {
  EXPECT_EQ(r.signal, 0) << "gotap died on a signal";
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.rfind("gotap: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("gotap-test-" + std::to_string(getpid()) + "-" + name))
      .string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream o(path, std::ios::binary);
  o << bytes;
}

// A small default-flavour Go fixture to mutilate.
std::string some_go_binary() {
  for (const auto& f : all_fixtures("basic"))
    if (f.flavour == "default") return f.path;
  return "";
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gotap()) GTEST_SKIP() << "gotap binary not built at " << gotap_binary();
  }
};

TEST_F(Cli, NoArgumentsIsUsageError) {
  auto r = run_command({gotap_binary()});
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(Cli, UnknownCommandAndOption) {
  auto r = run_command({gotap_binary(), "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  r = run_command({gotap_binary(), "info", "--no-such-option", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
}

TEST_F(Cli, MissingFile) {
  auto r = run_command({gotap_binary(), "info", "/nonexistent/binary"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("/nonexistent/binary"), std::string::npos);
}

// Records: version 1 mixed struct field names with gotap's marks and cannot be converted
// without guessing; report says so in one line (exit 2). A version 2 record whose struct
// has fields named like marks (hugo's `location` threw type_error.302) is shown.
TEST_F(Cli, ReportOfRecordVersions) {
  const std::string v1 = temp_path("v1.rec"), v2 = temp_path("v2.rec");
  write_bytes(v1,
              "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":1,"
              "\"command\":\"trace\"}\n{\"event\":\"entry\",\"func\":\"main.f\",\"args\":[]}\n");
  auto r = run_command({gotap_binary(), "report", v1});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("version 1"), std::string::npos) << r.err;
  write_bytes(v2,
              "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":2,"
              "\"command\":\"trace\"}\n"
              R"({"event":"entry","ts_ns":1,"goid":1,"tid":1,"func":"main.Parse","args":[)"
              R"({"name":"c","type":"main.Ctx","value":{"fields":[)"
              R"({"name":"location","value":{"fields":[{"name":"file","value":"a.md"}]}},)"
              R"({"name":"raw","value":{"len":2,"cap":2,"bytes":"6869"}}]}}]})"
              "\n");
  r = run_command({gotap_binary(), "report", v2});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(R"(main.Parse(c={location:{file:"a.md"}, raw:"hi"}))"), std::string::npos)
      << r.out;
  fs::remove(v1);
  fs::remove(v2);
}

// A crafted record's names and strings carry a screen clear (ESC[2J) and a bidi override
// (U+202E): every view shows them escaped as Go's %q does (Go prints "F\x1b[2J\u202e" for
// them), never raw (issue 35). A record cannot hold invalid UTF-8: the JSON parser refuses
// the line (test_go_quote.cpp covers such names).
TEST_F(Cli, ReportEscapesHostileNames) {
  const std::string rec = temp_path("hostile.rec");
  const std::string bad = "F\x1b[2J\xe2\x80\xae";
  nlohmann::json args = nlohmann::json::array(
      {{{"name", bad},
        {"value",
         {{"fields", nlohmann::json::array(
                         {{{"name", bad}, {"value", 1}}, {{"name", "s"}, {"value", bad}}})}}}}});
  nlohmann::json entry = {{"event", "entry"}, {"ts_ns", 1},  {"goid", 1},
                          {"tid", 1},         {"func", bad}, {"args", args}};
  nlohmann::json ret = {{"event", "return"}, {"ts_ns", 2},       {"goid", 1},      {"tid", 1},
                        {"func", bad},       {"duration_ns", 1}, {"results", args}};
  auto line = [&](const nlohmann::json& j) { return j.dump() + "\n"; };
  write_bytes(rec,
              "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":2,"
              "\"command\":\"trace\"}\n" +
                  line(entry) + line(ret) +
                  "{\"event\":\"summary\",\"events\":2,\"lost\":0,\"backend\":\"ptrace\"}\n");
  const std::string quoted = R"("F\x1b[2J\u202e")";
  for (const char* format : {"text", "latency", "graph", "folded", "svg", "perfetto", "json"}) {
    SCOPED_TRACE(format);
    std::vector<std::string> argv = {gotap_binary(), "report", "--format", format, rec};
    if (std::string(format) == "graph") argv.insert(argv.begin() + 2, "--args");
    auto r = run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    // JSON Lines keep non-ASCII as UTF-8 (docs/cli.md "Quoting"); every other view escapes it.
    if (std::string(format) != "json") {
      EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
    }
    const std::string f = format;
    if (f == "text") {
      // The function, the parameter and the field name, and the string value.
      EXPECT_NE(
          r.out.find("-> " + quoted + "(" + quoted + "={" + quoted + ":1, s:" + quoted + "})"),
          std::string::npos)
          << r.out;
    } else if (f == "json" || f == "perfetto") {
      EXPECT_NE(r.out.find(f == "json" ? "F\\u001b[2J\xe2\x80\xae" : "F\\u001b[2J\\u202e"),
                std::string::npos)
          << r.out;
    } else if (f == "svg") {
      EXPECT_NE(r.out.find("&quot;F\\x1b[2J\\u202e&quot;"), std::string::npos) << r.out;
    } else {
      EXPECT_NE(r.out.find(quoted), std::string::npos) << r.out;
    }
  }
  fs::remove(rec);
}

// A record line nested 200,000 deep (it crashed report with SIGSEGV) is refused before it is
// parsed: one line naming the line, exit 2. So is a field of another type than gotap writes.
TEST_F(Cli, ReportOfDeepOrMistypedRecord) {
  const std::string rec = temp_path("deep.rec");
  const std::string header =
      "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":2,\"command\":\"trace\"}\n";
  const std::string deep = R"({"event":"entry","func":"main.f","args":[{"name":"a","value":)" +
                           std::string(200000, '[') + std::string(200000, ']') + "}]}\n";
  for (const char* format : {"text", "json", "graph", "perfetto", "svg"}) {
    write_bytes(rec, header + deep);
    auto r = run_command({gotap_binary(), "report", "--format", format, rec});
    EXPECT_EQ(r.exit_code, 2) << format << ": " << r.err;
    expect_one_error_line(r);
    EXPECT_NE(r.err.find(rec + ":2: nests deeper than 4016 levels"), std::string::npos) << r.err;
  }
  // Just under the ceiling is a record gotap reads: 4011 levels of value in 4 of event.
  write_bytes(
      rec,
      header +
          R"({"event":"entry","ts_ns":1,"goid":1,"tid":1,"func":"main.f","args":[{"name":"a","value":)" +
          std::string(4011, '[') + std::string(4011, ']') + "}]}\n");
  for (const char* format : {"text", "json", "graph", "perfetto", "svg"}) {
    auto r = run_command({gotap_binary(), "report", "--format", format, rec});
    EXPECT_EQ(r.exit_code, 0) << format << ": " << r.err;
    EXPECT_EQ(r.signal, 0);
  }
  write_bytes(rec, header + "{\"event\":\"entry\",\"func\":\"main.f\",\"goid\":\"x\"}\n");
  auto r = run_command({gotap_binary(), "report", rec});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_error_line(r);
  EXPECT_NE(r.err.find(rec + ":2: "), std::string::npos) << r.err;
  write_bytes(rec,
              "{\"event\":\"record\",\"format\":\"gotap-record\",\"version\":2,\"command\":7}\n");
  r = run_command({gotap_binary(), "report", rec});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_one_error_line(r);
  fs::remove(rec);
}

TEST_F(Cli, MaxLineMustNotBeNegative) {
  auto r = run_command({gotap_binary(), "trace", "--max-line", "-1", "main.f", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
}

// -i SECONDS must be a positive number of seconds (a print per microsecond or less is all a
// trace would do): zero, negative, NaN and words get one line and exit 2.
TEST_F(Cli, IntervalMustBePositive) {
  for (const std::string cmd : {"count", "latency"})
    for (const std::string bad : {"0", "-1", "-0.5", "0.0001", "nan", "soon"}) {
      SCOPED_TRACE(cmd + " -i " + bad);
      auto r = run_command({gotap_binary(), cmd, "-i", bad, "main.f", "--", "/bin/true"});
      EXPECT_EQ(r.exit_code, 2);
      expect_one_error_line(r);
      EXPECT_NE(r.err.find("interval"), std::string::npos) << r.err;
    }
}

// Every decode limit has a ceiling (docs/cli.md): --max-depth 8000 overflowed the decoder's
// stack, --max-str 2000000000 took 2 to 11 GB (issue 35). Past it: one line, exit 2.
TEST_F(Cli, DecodeLimitsAboveTheirCeilingsAreRefused) {
  for (const auto& [flag, ok, bad] :
       {std::tuple{"--max-depth", "1000", "1001"}, std::tuple{"--max-depth", "1000", "8000"},
        std::tuple{"--max-str", "1048576", "2000000000"},
        std::tuple{"--max-str", "1048576", "1048577"}, std::tuple{"--max-elems", "10000", "10001"},
        std::tuple{"--max-line", "67108864", "67108865"}}) {
    SCOPED_TRACE(std::string(flag) + " " + bad);
    auto r = run_command({gotap_binary(), "trace", flag, bad, "main.f", "--", "/bin/true"});
    EXPECT_EQ(r.exit_code, 2);
    expect_one_error_line(r);
    EXPECT_NE(r.err.find(std::string(flag) + " must be at most " + ok), std::string::npos) << r.err;
    // At the ceiling the limit is taken: the failure, if any, is another one (no such
    // function in /bin/true), not the limit.
    r = run_command({gotap_binary(), "trace", flag, ok, "main.f", "--", "/bin/true"});
    EXPECT_EQ(r.err.find("must be at most"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, NonElfFile) {
  std::string p = temp_path("text");
  write_bytes(p, "#!/bin/sh\necho not an ELF file\n");
  auto r = run_command({gotap_binary(), "info", p});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  write_bytes(p, "");
  r = run_command({gotap_binary(), "funcs", p});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  fs::remove(p);
}

TEST_F(Cli, NonGoElfFile) {
  auto r = run_command({gotap_binary(), "info", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
}

TEST_F(Cli, TruncatedGoBinaries) {
  std::string bin = some_go_binary();
  if (bin.empty()) GTEST_SKIP() << "no Go fixtures built (tests/tools/build-fixtures.sh)";
  std::string bytes = read_file(bin);
  std::string p = temp_path("truncated");
  for (size_t len : {size_t(10), size_t(64), size_t(100), size_t(4096), bytes.size() / 4,
                     bytes.size() / 2, bytes.size() - 1000}) {
    write_bytes(p, bytes.substr(0, len));
    for (const char* cmd : {"info", "funcs"}) {
      auto r = run_command({gotap_binary(), cmd, p});
      SCOPED_TRACE(std::string(cmd) + " on " + std::to_string(len) + " bytes");
      EXPECT_EQ(r.signal, 0);
      // Only a file cut in its last kilobyte may still hold everything gotap reads (the
      // pclntab and the headers); a file cut anywhere earlier must be refused.
      if (len != bytes.size() - 1000 || r.exit_code != 0) {
        EXPECT_EQ(r.exit_code, 2);
        expect_one_error_line(r);
      }
    }
  }
  fs::remove(p);
}

// Corrupts the pclntab header (found by its magic) in several ways.
TEST_F(Cli, CorruptPclntab) {
  std::string bin = some_go_binary();
  if (bin.empty()) GTEST_SKIP() << "no Go fixtures built (tests/tools/build-fixtures.sh)";
  std::string bytes = read_file(bin);
  size_t at = std::string::npos;
  for (const char* magic : {"\xf1\xff\xff\xff\x00\x00\x01\x08", "\xf0\xff\xff\xff\x00\x00\x01\x08",
                            "\xfa\xff\xff\xff\x00\x00\x01\x08"}) {
    at = bytes.find(std::string(magic, 8));
    if (at != std::string::npos) break;
  }
  ASSERT_NE(at, std::string::npos) << "no pclntab magic in " << bin;
  std::string p = temp_path("corrupt");
  struct Mutation {
    const char* what;
    size_t offset;
    std::string bytes;
  };
  std::vector<Mutation> mutations = {
      {"magic", 0, std::string("\x12\x34\x56\x78", 4)},
      {"nfunc huge", 8, std::string("\xff\xff\xff\x7f\x00\x00\x00\x00", 8)},
      {"table offsets out of range", 32, std::string(24, '\xff')},
      {"functab garbage", 80, std::string(4096, '\xa5')},
  };
  for (const auto& m : mutations) {
    std::string b = bytes;
    b.replace(at + m.offset, m.bytes.size(), m.bytes);
    write_bytes(p, b);
    SCOPED_TRACE(m.what);
    auto r = run_command({gotap_binary(), "funcs", "--json", p});
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    expect_one_error_line(r);
  }
  fs::remove(p);
}

// A binary of a Go release newer than gotap knows (a stripped 1.27 fixture patched to say
// go1.28): funcs works and says so in exactly one "gotap: warning:" line; info lists the
// same warning and the layout it read the binary with.
TEST_F(Cli, NewerGoReleaseIsOneWarning) {
  std::string src;
  for (const auto& f : all_fixtures("basic"))
    if (f.go_version == "1.27" && f.flavour == "stripped") src = f.path;
  if (src.empty()) GTEST_SKIP() << "no Go 1.27 fixtures built (tests/tools/build-fixtures.sh)";
  std::string b = read_file(src);
  size_t patched = 0;
  for (size_t p = b.find("go1.27."); p != std::string::npos; p = b.find("go1.27.", p + 1)) {
    b.replace(p, 7, "go1.28.");
    ++patched;
  }
  ASSERT_GT(patched, 0u);
  std::string p = temp_path("go128");
  write_bytes(p, b);
  auto r = run_command({gotap_binary(), "funcs", p, "main.*"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("gotap: warning: go1.28.", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("newer than the newest Go release gotap knows (go1.27)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("main.main"), std::string::npos);
  auto i = run_command({gotap_binary(), "info", "--json", p});
  fs::remove(p);
  ASSERT_EQ(i.exit_code, 0) << i.err;
  auto j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j["moduledata_layout"], "1.27");
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_NE(j["warnings"][0].get<std::string>().find("newer"), std::string::npos);
  // The unpatched binary: no warning at all.
  auto k = run_command({gotap_binary(), "info", "--json", src});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  auto jk = nlohmann::json::parse(k.out);
  EXPECT_EQ(jk["moduledata_layout"], "1.27");
  EXPECT_TRUE(jk["warnings"].empty());
}

// `funcs`' columns line up whatever the names' lengths: runtime's method and closure names run
// past any fixed width (issue: columns misaligned on long names).
TEST_F(Cli, FuncsColumnsLineUpOnLongNames) {
  std::string bin = some_go_binary();
  if (bin.empty()) GTEST_SKIP() << "no basic fixture built (tests/tools/build-fixtures.sh)";
  RunResult r = run_command({gotap_binary(), "funcs", bin, "runtime.*"}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::string header;
  ASSERT_TRUE(std::getline(in, header));
  const size_t entry_end = header.find("ENTRY") + 5;
  ASSERT_NE(header.find("ENTRY"), std::string::npos) << header;
  size_t rows = 0, longest = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == ' ') continue;  // "    inlined in ..." lines
    const size_t name_end = line.find(' ');
    longest = std::max(longest, name_end);
    // The ENTRY column is right-aligned: its last character sits under the header's.
    const size_t entry = line.find_first_not_of(' ', name_end);
    const size_t end = line.find(' ', entry);
    ASSERT_NE(entry, std::string::npos) << line;
    EXPECT_EQ(end, entry_end) << line;
    ++rows;
  }
  EXPECT_GT(rows, 100u);
  EXPECT_GT(longest, 50u) << "no long name: the check proves nothing";
}

TEST_F(Cli, PatternMatchingNothingNamesThePattern) {
  std::string bin = some_go_binary();
  if (bin.empty()) GTEST_SKIP() << "no Go fixtures built (tests/tools/build-fixtures.sh)";
  auto r = run_command({gotap_binary(), "funcs", bin, "main.*", "nosuchpkg.NoSuchFunc"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("nosuchpkg.NoSuchFunc"), std::string::npos) << r.err;
  r = run_command({gotap_binary(), "funcs", bin, "re:("});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
}

// graph's ROOT may be a pattern when it names one function (tests/unit/test_runtime_graph.cpp
// traces one); one naming several is refused, naming them: in tests/fixtures/graph,
// `main.[hp]a*` is main.handle and main.parse.
TEST_F(Cli, GraphRootMatchingSeveralFunctionsIsRefused) {
  std::string bin;
  for (const auto& f : all_fixtures("graph"))
    if (f.flavour == "default") bin = f.path;
  if (bin.empty()) GTEST_SKIP() << "no graph fixtures (tests/tools/build-fixtures.sh)";
  auto r = run_command({gotap_binary(), "graph", "main.[hp]a*", "--", bin});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("matches 2 functions (main.handle, main.parse)"), std::string::npos)
      << r.err;
  r = run_command({gotap_binary(), "graph", "main.nosuch*", "--", bin});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
}

// --jumps-only is the trampoline backend's: with another backend, or a library's copy (which
// no jump reaches), it is refused, not ignored.
TEST_F(Cli, JumpsOnlyGoesWithTheTrampolineBackend) {
  for (const std::string backend : {"auto", "ebpf", "ptrace"}) {
    auto r = run_command({gotap_binary(), "count", "--backend", backend, "--jumps-only", "main.*",
                          "--", "/bin/true"});
    EXPECT_EQ(r.exit_code, 2) << backend;
    expect_one_error_line(r);
    EXPECT_NE(r.err.find("--jumps-only goes with --backend trampoline"), std::string::npos)
        << r.err;
  }
  auto r = run_command({gotap_binary(), "count", "--backend", "trampoline", "--jumps-only",
                        "--binary", "/bin/true", "main.*", "-p", std::to_string(getpid())});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("not in a library's"), std::string::npos) << r.err;
}

TEST_F(Cli, TraceNeedsExactlyOneTarget) {
  auto r = run_command({gotap_binary(), "trace", "main.*"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  r = run_command({gotap_binary(), "trace", "-p", "999999999", "main.*"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  // --binary names what --all traces, or a library's copy in the process of -p PID; with
  // -- CMD it was ignored, silently.
  r = run_command({gotap_binary(), "count", "--binary", "/bin/true", "main.*", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("--binary goes with --all or -p PID"), std::string::npos) << r.err;
  r = run_command(
      {gotap_binary(), "count", "--binary", "/bin/true", "main.*", "-p", std::to_string(getpid())});
  EXPECT_EQ(r.exit_code, 2);
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("not a Go binary"), std::string::npos) << r.err;
  // A file the process does not map: refused after its plan, nothing placed.
  const auto fixtures = all_fixtures("basic");
  if (geteuid() == 0 && !fixtures.empty()) {
    r = run_command({gotap_binary(), "count", "--backend", "ebpf", "--binary",
                     fixtures.front().path, "main.*", "-p", std::to_string(getpid())});
    EXPECT_EQ(r.exit_code, 1);
    expect_one_error_line(r);
    EXPECT_NE(r.err.find("does not map"), std::string::npos) << r.err;
  }
}

// info --json reports the version Go's own `go version BINARY` printed for every fixture.
TEST_F(Cli, InfoAgreesWithGoVersion) {
  auto fixtures = all_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no Go fixtures built (tests/tools/build-fixtures.sh)";
  int checked = 0;
  for (const auto& f : fixtures) {
    std::string ref = read_file(f.path + ".version");
    if (ref.empty()) continue;
    SCOPED_TRACE(f.label());
    auto r = run_command({gotap_binary(), "info", "--json", f.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    // The first key, as on every line (docs/json.md): a reader may look no further.
    EXPECT_EQ(r.out.rfind("{\"event\":\"info\",", 0), 0u) << r.out.substr(0, 80);
    // `go version X` prints "X: go1.21.13"
    std::string want = ref.substr(ref.rfind(' ') + 1);
    while (!want.empty() && (want.back() == '\n' || want.back() == ' ')) want.pop_back();
    EXPECT_EQ(j["go_version"].get<std::string>(), want);
    EXPECT_EQ(j["stripped"].get<bool>(), f.flavour.ends_with("stripped"));
    EXPECT_EQ(j["dwarf"].get<bool>(), !f.flavour.ends_with("stripped"));
    EXPECT_EQ(j["pie"].get<bool>(), f.flavour.starts_with("pie"));
    EXPECT_GT(j["functions"].get<int>(), 100);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no fixture had a .version reference";
}

}  // namespace
}  // namespace gotap::testing
