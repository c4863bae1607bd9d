// Record once, view many ways, once per backend: a trace recorded with --record renders in
// `gotap report` exactly as the live run printed it, and its exports are well-formed:
// Perfetto slices nest and run in time order on each goroutine's track, folded stacks
// account for every traced nanosecond, and the SVG is balanced markup with one frame per
// distinct stack.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

size_t count_of(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

class Record : public ::testing::TestWithParam<std::string> {};

TEST_P(Record, ReportMatchesLiveAndExportsAreWellFormed) {
  const std::string backend = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fx = all_fixtures("demo");
  if (fx.empty()) GTEST_SKIP() << "no demo fixtures (tests/tools/build-fixtures.sh)";
  const Fixture& f = fx.back();
  fs::path dir = fs::temp_directory_path() / ("gotap-rec-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string rec = (dir / "trace.rec").string(), live = (dir / "live.txt").string();
  const std::vector<std::string> funcs = {"main.processOrder", "main.discount", "main.audit"};

  std::vector<std::string> argv = {gotap_binary(), "trace", "--backend", backend,
                                   "-o",           live,    "--record",  rec};
  argv.insert(argv.end(), funcs.begin(), funcs.end());
  for (const char* a : {"--", "", "-n", "9", "-sleep", "1ms"}) argv.push_back(a);
  argv[argv.size() - 5] = f.path;
  auto r = run_command(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The program printed one line per order: that many calls of processOrder were made.
  const size_t orders = count_of(r.out, "order id=");
  ASSERT_EQ(orders, 9u) << r.out;

  // report == live, byte for byte.
  auto rep = run_command({gotap_binary(), "report", rec});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(rep.out, read_file(live));

  // Perfetto: per goroutine track, complete slices in time order that nest properly.
  auto pf = run_command({gotap_binary(), "report", "--format", "perfetto", rec});
  ASSERT_EQ(pf.exit_code, 0) << pf.err;
  auto doc = json::parse(pf.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << pf.out.substr(0, 300);
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::map<int64_t, std::vector<std::pair<double, double>>> open;  // tid -> [start, end)
  std::map<int64_t, double> last_ts;
  std::map<std::string, size_t> slices;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M") continue;
    ASSERT_EQ(e["ph"], "X") << e;
    const int64_t tid = e["tid"];
    const double ts = e["ts"], end = ts + e["dur"].get<double>();
    EXPECT_GE(e["dur"].get<double>(), 0);
    EXPECT_GE(ts, last_ts[tid]) << "out of order on goroutine " << tid;
    last_ts[tid] = ts;
    auto& st = open[tid];
    while (!st.empty() && st.back().second <= ts) st.pop_back();
    if (!st.empty()) EXPECT_LE(end, st.back().second + 1e-3) << "slice crosses its parent: " << e;
    st.push_back({ts, end});
    ++slices[e["name"].get<std::string>()];
  }
  EXPECT_EQ(slices["main.processOrder"], orders);
  EXPECT_EQ(slices["main.audit"], orders);

  // Folded stacks: discount runs under processOrder only; the weights add up to the time
  // spent in the outermost traced calls.
  auto fo = run_command({gotap_binary(), "report", "--format", "folded", rec});
  ASSERT_EQ(fo.exit_code, 0) << fo.err;
  uint64_t folded_total = 0;
  std::istringstream lines(fo.out);
  std::regex line_re("([^ ]+) ([0-9]+)");
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line_re)) << l;
    if (m[1].str().find("main.discount") != std::string::npos)
      EXPECT_EQ(m[1].str(), "main.processOrder;main.discount");
    folded_total += std::stoull(m[2]);
  }
  double roots = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["name"] != "main.discount") roots += e["dur"].get<double>() * 1e3;
  EXPECT_NEAR(static_cast<double>(folded_total), roots, 1e3 * slices.size());

  // SVG: balanced, and one frame (title) per distinct stack prefix plus the root.
  auto svg = run_command({gotap_binary(), "report", "--format", "svg", rec});
  ASSERT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_EQ(svg.out.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.out.find("</svg>"), std::string::npos);
  EXPECT_EQ(count_of(svg.out, "<g>"), count_of(svg.out, "</g>"));
  EXPECT_EQ(count_of(svg.out, "<title>"), count_of(svg.out, "<rect x="));
  EXPECT_EQ(count_of(svg.out, "<title>"), 1u + 3u);  // all, processOrder, discount, audit
  for (const auto& fn : funcs) EXPECT_NE(svg.out.find(fn), std::string::npos) << fn;

  // Bad records are bad input.
  auto bad = run_command({gotap_binary(), "report", live});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err.rfind("gotap: ", 0), 0u) << bad.err;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, Record, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
