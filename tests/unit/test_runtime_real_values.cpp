// Values of real programs (issue 23 hole 9), once per backend: arguments that Debian's
// stripped Go programs were really given (prometheus's queries and times, etcd's keys and
// revisions, hugo's page sources, restic's file names, caddy's paths and statuses) must be
// what gotap shows, against what the test sent and what the program itself printed or
// logged. Counts of the same programs: test_runtime_real_programs.
// A test skips only when its program is not installed (dev.sh TEST_PACKAGES).
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"
#include "tests/unit/real_programs.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

class RealProgramValues : public RealProgramTest {};

// Values: each instant query's PromQL text reaches promql.(*Engine).NewInstantQuery as its
// string argument `qs`, once per request, as the test sent it.
TEST_P(RealProgramValues, PrometheusQueriesAsSent) {
  if (auto why = Prometheus::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("prometheus-values");
  Prometheus prom(dir);
  ASSERT_EQ(prom.start(), "");
  const std::string new_query = "github.com/prometheus/prometheus/promql.(*Engine).NewInstantQuery";
  const std::vector<std::string> sent = {"up",
                                         "vector(1)",
                                         "sum(up)",
                                         "count(up) or vector(0)",
                                         "time() + 2 * 3",
                                         "label_replace(vector(7), \"a\", "
                                         "\"b\", \"\", \"\")"};
  int answered = 0;
  std::string out =
      attached({"trace", "--max-depth", "0", new_query}, prom.service().pid(), dir, [&] {
        for (const std::string& q : sent)
          answered += get_ok(prom.port(), "/api/v1/query?query=" + query_escape(q),
                             "\"status\":\"success\"");
      });
  ASSERT_EQ(answered, static_cast<int>(sent.size())) << "queries failed while traced";
  std::vector<json> entries = events_in(out, "entry");
  std::sort(entries.begin(), entries.end(),
            [](const json& a, const json& b) { return a["ts_ns"] < b["ts_ns"]; });
  std::vector<std::string> traced;
  for (const json& e : entries) {
    json qs = arg_value(e, "arg3");
    traced.push_back(qs.is_string() ? qs.get<std::string>() : qs.dump());
  }
  EXPECT_EQ(traced, sent) << out.substr(0, 4000);
  EXPECT_TRUE(get_ok(prom.port(), "/api/v1/query?query=up", "success"));
  EXPECT_TRUE(prom.service().alive());
}

// Values in registers and on the stack: an instant query at time=T reaches
// NewInstantQuery(.., qs string, ts time.Time), and a range query
// NewRangeQuery(.., qs, start, end time.Time, interval time.Duration) (end and interval are
// passed on the stack), with the times and step the test sent.
TEST_P(RealProgramValues, PrometheusQueryTimesAsSent) {
  if (auto why = Prometheus::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("prometheus-times");
  Prometheus prom(dir);
  ASSERT_EQ(prom.start(), "");
  const std::string instant = "github.com/prometheus/prometheus/promql.(*Engine).NewInstantQuery",
                    range = "github.com/prometheus/prometheus/promql.(*Engine).NewRangeQuery";
  int answered = 0;
  std::string out =
      attached({"trace", "--max-depth", "1", instant, range}, prom.service().pid(), dir, [&] {
        answered += get_ok(prom.port(), "/api/v1/query?query=up&time=1700000000.25", "success");
        answered += get_ok(prom.port(),
                           "/api/v1/query_range?query=vector(2)&start=1700000000&end=1700000600"
                           "&step=90",
                           "success");
      });
  ASSERT_EQ(answered, 2) << "queries failed while traced";
  std::vector<json> entries = events_in(out, "entry");
  ASSERT_EQ(entries.size(), 2u) << out.substr(0, 4000);
  std::sort(entries.begin(), entries.end(),
            [](const json& a, const json& b) { return a["ts_ns"] < b["ts_ns"]; });
  ASSERT_EQ(entries[0]["func"], instant);
  EXPECT_EQ(arg_value(entries[0], "arg3"), "up");
  EXPECT_EQ(traced_unix_ns(arg_value(entries[0], "arg4")), 1700000000250000000)
      << arg_value(entries[0], "arg4");
  ASSERT_EQ(entries[1]["func"], range);
  EXPECT_EQ(arg_value(entries[1], "arg3"), "vector(2)");
  EXPECT_EQ(traced_unix_ns(arg_value(entries[1], "arg4")), 1700000000000000000)
      << arg_value(entries[1], "arg4");
  EXPECT_EQ(traced_unix_ns(arg_value(entries[1], "arg5")), 1700000600000000000)
      << arg_value(entries[1], "arg5");
  EXPECT_EQ(traced_duration_ns(arg_value(entries[1], "arg6")), 90000000000)
      << arg_value(entries[1], "arg6");
  EXPECT_TRUE(prom.service().alive());
}

// Values of a real program: etcd's key index takes each key put, as a []byte, with the
// revision etcd gives the put (mvcc treeIndex.Put(key []byte, rev revision)). The keys are
// what etcdctl sent, and each revision is the one etcd told etcdctl (`put -w json`).
TEST_P(RealProgramValues, EtcdKeysAndRevisionsAsSent) {
  if (auto why = Etcd::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("etcd-values");
  Etcd etcd(dir);
  ASSERT_EQ(etcd.start(), "");
  const std::string index_put = "go.etcd.io/etcd/mvcc.(*treeIndex).Put";
  constexpr int kKeys = 5;
  std::vector<int64_t> revisions;  // what etcd answered each put
  std::string out =
      attached({"trace", "--max-depth", "1", index_put}, etcd.service().pid(), dir, [&] {
        for (int i = 0; i < kKeys; ++i) {
          auto r = etcd.ctl({"put", "-w", "json", etcd_key(i), etcd_value(i)});
          json j = json::parse(r.value_or(""), nullptr, false);
          if (j.is_object() && j["header"].contains("revision"))
            revisions.push_back(j["header"]["revision"].get<int64_t>());
        }
      });
  ASSERT_EQ(revisions.size(), static_cast<size_t>(kKeys)) << "puts failed while traced";
  std::vector<json> entries = events_in(out, "entry");
  ASSERT_EQ(entries.size(), static_cast<size_t>(kKeys)) << out.substr(0, 4000);
  std::sort(entries.begin(), entries.end(),
            [](const json& a, const json& b) { return a["ts_ns"] < b["ts_ns"]; });
  for (int i = 0; i < kKeys; ++i) {
    const json key = arg_value(entries[i], "arg1"), rev = arg_value(entries[i], "arg2");
    EXPECT_EQ(traced_bytes(key), etcd_key(i)) << "put " << i << ": " << key;
    EXPECT_EQ(traced_field(rev, "main"), revisions[i]) << "put " << i << ": " << rev;
    EXPECT_EQ(traced_field(rev, "sub"), 0) << rev;
  }
  EXPECT_EQ(etcd.ctl({"get", etcd_key(1)}), etcd_key(1) + "\n" + etcd_value(1) + "\n");
  EXPECT_TRUE(etcd.service().alive());
}

// Values in a struct passed in seven registers: goldmark's Parse gets each page's
// converter.RenderContext, whose Src is the page's markdown after its front matter.
TEST_P(RealProgramValues, HugoParseGetsEachPageSource) {
  const std::string hugo = debian_program("hugo");
  if (hugo.empty()) GTEST_SKIP() << "Debian's hugo is not installed (apt install hugo)";
  TempDir dir("hugo-values");
  constexpr int kPages = 4;
  write_site(dir, kPages);
  const std::string parse = "github.com/gohugoio/hugo/markup/goldmark.(*goldmarkConverter).Parse";
  const std::string out = dir / "gotap.jsonl";
  RunResult r = run_command(
      {gotap_binary(), "trace", "--backend", backend(), "--json", "--max-depth", "1", "-o", out,
       parse, "--", hugo, "--quiet", "--source", dir / "site", "--destination", dir / "public"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> entries = events_in(read_file(out), "entry");
  ASSERT_EQ(entries.size(), static_cast<size_t>(kPages)) << read_file(out).substr(0, 4000);
  std::multiset<int> pages;  // the page whose body each call got
  for (const json& e : entries) {
    const json ctx = arg_value(e, "arg1");
    std::optional<std::string> src = traced_bytes(traced_field(ctx, "Src"));
    ASSERT_TRUE(src) << ctx.dump().substr(0, 2000);
    for (int i = 0; i < kPages; ++i)
      if (src->find(page_body(i)) != std::string::npos) pages.insert(i);
  }
  std::multiset<int> all;
  for (int i = 0; i < kPages; ++i) all.insert(i);
  EXPECT_EQ(pages, all);
}

// Values: restic's archiver builds each item's node from its file info once
// ((*Archiver).nodeFromFileInfo(filename string, fi os.FileInfo)): the names are those of
// the directory given to `restic backup` and everything in it, each once.
TEST_P(RealProgramValues, ResticBackupFileNamesAsGiven) {
  const std::string restic = debian_program("restic");
  if (restic.empty()) GTEST_SKIP() << "Debian's restic is not installed (apt install restic)";
  TempDir dir("restic-values");
  const std::string top = dir / "data";
  std::vector<std::string> given = {top, dir / "data/sub", dir / "data/sub/deeper"};
  for (const char* f : {"data/a.txt", "data/with space", "data/sub/b.bin", "data/sub/deeper/c",
                        "data/sub/deeper/\xc3\xa9t\xc3\xa9"}) {
    write_text(dir / f, f);
    given.push_back(dir / f);
  }
  std::sort(given.begin(), given.end());
  write_text(dir / "password", "gotap-test-password\n");
  const std::vector<std::string> repo = {"-r", dir / "repo", "--password-file", dir / "password"};
  std::vector<std::string> init = {restic};
  init.insert(init.end(), repo.begin(), repo.end());
  init.push_back("init");
  RunResult ri = run_command(init, 60);
  ASSERT_EQ(ri.exit_code, 0) << ri.err;

  const std::string node =
      "github.com/restic/restic/internal/archiver.(*Archiver).nodeFromFileInfo";
  const std::string out = dir / "gotap.jsonl";
  std::vector<std::string> argv = {gotap_binary(), "trace", "--backend", backend(), "--json",
                                   "--max-depth",  "0",     "-o",        out,       node,
                                   "--",           restic};
  argv.insert(argv.end(), repo.begin(), repo.end());
  argv.insert(argv.end(), {"backup", "--quiet", top});
  RunResult r = run_command(argv, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> traced;
  for (const json& e : events_in(read_file(out), "entry")) {
    json name = arg_value(e, "arg1");
    std::string n = name.is_string() ? name.get<std::string>() : name.dump();
    // Given an absolute path, restic also makes nodes for the directories above it
    // (/tmp, ...), which hold more than the test's files: only the backup's own are compared.
    if (n == top || n.rfind(top + "/", 0) == 0) traced.push_back(n);
  }
  std::sort(traced.begin(), traced.end());
  EXPECT_EQ(traced, given) << read_file(out).substr(0, 4000);
  Counts c = counts_in(read_file(out));
  ASSERT_TRUE(c.summary);
  EXPECT_EQ((*c.summary)["exit_code"], 0);
}

// Values of a real program (issue 23 hole 9): caddy serving on loopback with its access log
// on. Each request's goroutine parses its path (net/url.(*URL).setPath(p string)) and writes
// its status (net/http.(*response).WriteHeader(code int)); both, per goroutine, must be what
// the test asked for and what caddy logged.
TEST_P(RealProgramValues, CaddyPathsAndStatusesAsLogged) {
  if (auto why = Caddy::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("caddy");
  Caddy caddy(dir);
  ASSERT_EQ(caddy.start(), "");
  const size_t logged_before = caddy.access_log().size();

  const std::vector<std::pair<std::string, int>> kinds = {
      {"/ok", 200}, {"/tea", 418}, {"/none", 204}, {"/missing/page", 404}};
  std::vector<std::pair<std::string, int>> sent;
  for (int i = 0; i < 12; ++i) sent.push_back(kinds[i % kinds.size()]);
  const std::string set_path = "net/url.(*URL).setPath",
                    write_header = "net/http.(*response).WriteHeader";
  int answered = 0;
  std::string out = attached(
      {"trace", "--max-depth", "0", set_path, write_header}, caddy.service().pid(), dir, [&] {
        for (const auto& [path, status] : sent) {
          auto r = http_get(caddy.port(), path);
          answered += r && r->rfind("HTTP/1.1 " + std::to_string(status), 0) == 0;
        }
      });
  ASSERT_EQ(answered, static_cast<int>(sent.size())) << "requests failed while traced";

  // What gotap saw, request by request: the path and status of each goroutine, in order.
  std::vector<json> entries = events_in(out, "entry");
  std::sort(entries.begin(), entries.end(),
            [](const json& a, const json& b) { return a["ts_ns"] < b["ts_ns"]; });
  std::vector<uint64_t> order;
  std::map<uint64_t, std::pair<std::vector<std::string>, std::vector<int>>> by_goid;
  for (const json& e : entries) {
    uint64_t g = e["goid"].get<uint64_t>();
    if (!by_goid.count(g)) order.push_back(g);
    json v = arg_value(e, "arg1");
    if (e["func"] == set_path)
      by_goid[g].first.push_back(v.is_string() ? v.get<std::string>() : v.dump());
    if (e["func"] == write_header)
      by_goid[g].second.push_back(v.is_number_integer() ? v.get<int>() : -1);
  }
  std::vector<std::pair<std::string, int>> traced;
  for (uint64_t g : order) {
    const auto& [paths, codes] = by_goid[g];
    EXPECT_EQ(paths.size(), 1u) << "goroutine " << g;
    EXPECT_EQ(codes.size(), 1u) << "goroutine " << g;
    if (!paths.empty() && !codes.empty()) traced.emplace_back(paths[0], codes[0]);
  }
  EXPECT_EQ(traced, sent) << out.substr(0, 4000);

  // What caddy logged for the same requests: the lines after those of the start-up check.
  std::vector<std::pair<std::string, int>> logged;
  wait_until(5000, [&] {
    logged = caddy.access_log();
    return logged.size() >= logged_before + sent.size();
  });
  ASSERT_EQ(logged.size(), logged_before + sent.size()) << caddy.log();
  logged.erase(logged.begin(), logged.begin() + static_cast<long>(logged_before));
  EXPECT_EQ(logged, sent);
  EXPECT_EQ(traced, logged);

  int after = 0;
  for (int i = 0; i < 20; ++i) after += get_ok(caddy.port(), "/ok", "ok");
  EXPECT_EQ(after, 20) << "caddy stopped serving after gotap detached";
  EXPECT_TRUE(caddy.service().alive());
}

// The readers of values (no tracing): each form they accept, against what Go itself says of
// the same value (time.Unix(1700000000, 250000000).UTC().String(), Duration.String()).
TEST(ValueReaders, ReadEveryFormTheyAccept) {
  const int64_t t = 1700000000250000000;
  EXPECT_EQ(traced_unix_ns(json::parse(R"({"wall":250000000,"ext":63835596800,"loc":null})")), t);
  EXPECT_EQ(traced_unix_ns(json::parse(
                R"({"fields":[{"name":"wall","value":250000000},{"name":"ext","value":63835596800},
                    {"name":"loc","value":null}]})")),
            t);
  // With a monotonic reading: wall = 1<<63 | seconds since 1885 << 30 | nanoseconds.
  const uint64_t mono = (1ull << 63) | (4382288000ull << 30) | 250000000u;
  EXPECT_EQ(traced_unix_ns(json{{"wall", mono}, {"ext", 12345}, {"loc", nullptr}}), t);
  EXPECT_EQ(traced_unix_ns("2023-11-14 22:13:20.25 +0000 UTC"), t);
  EXPECT_EQ(traced_unix_ns("2023-11-14 23:13:20.25 +0100 CET"), t);
  EXPECT_EQ(traced_unix_ns(json::parse(R"({"wall":1})")), std::nullopt);
  EXPECT_EQ(traced_duration_ns(90000000000), 90000000000);
  EXPECT_EQ(traced_duration_ns("1m30s"), 90000000000);
  EXPECT_EQ(traced_duration_ns("1.5ms"), 1500000);
  EXPECT_EQ(traced_duration_ns("2\u00b5s"), 2000);
  EXPECT_EQ(traced_duration_ns("-1h0m0.5s"), -3600500000000);
  EXPECT_EQ(traced_duration_ns(json::parse(R"({"duration":"1m30s","ns":90000000000})")),
            90000000000);
  EXPECT_EQ(traced_duration_ns("soon"), std::nullopt);
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":2,"cap":8,"elems":[104,105]})")), "hi");
  EXPECT_EQ(traced_bytes("hi"), "hi");
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":3,"cap":8,"bytes":"68690a"})")), "hi\n");
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":5,"cap":8,"bytes":"6869","truncated":true})")),
            std::nullopt);
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":4,"cap":8,"bytes":"","unreadable":true})")),
            std::nullopt);
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":5,"cap":8,"elems":[],"truncated":true})")),
            std::nullopt);
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":3,"cap":8,"elems":[104,105]})")), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(Backends, RealProgramValues, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
