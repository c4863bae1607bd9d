// Debian's stripped Go 1.19 programs as a user drives them, once per backend: prometheus
// answering its HTTP API, etcd serving etcdctl, hugo building a site, restic backing up a
// directory, and caddy serving with its access log on. Each count is checked for exact
// equality with what the test made the program do, each traced value against what the
// program was really given (what the test sent, the program's own output or log), and
// every program keeps serving after gotap detaches (attached) or exits 0 (launched).
// A test skips only when its program is not installed (dev.sh TEST_PACKAGES).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
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

class RealPrograms : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
  const std::string& backend() const { return GetParam(); }

  // `gotap ARGS... -p PID` around `drive()`, its JSON Lines output afterwards. gotap must
  // end with 0 once stopped with SIGINT.
  std::string attached(std::vector<std::string> args, pid_t pid, const TempDir& dir,
                       const std::function<void()>& drive) {
    args.insert(args.begin() + 1, {"--backend", backend(), "--json"});
    const std::string out = dir / ("gotap-" + args[0] + ".jsonl");
    AttachedGotap tap;
    std::string why = tap.attach(args, pid, out);
    EXPECT_TRUE(why.empty()) << why;
    if (!why.empty()) return "";
    drive();
    std::string err;
    EXPECT_EQ(tap.detach(&err), 0) << err;
    return read_file(out);
  }
};

// Each request to prometheus comes on a fresh connection: net/http.(*conn).serve runs once
// per request, and the API's query handler (web/api/v1 routes GET /api/v1/query to
// (*API).query) once per request. All are answered 200, so net/http.NotFound, which
// prometheus inlines into StripPrefix, httprouter and serveDebug, never runs.
TEST_P(RealPrograms, PrometheusApiCountsExact) {
  if (auto why = Prometheus::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("prometheus-count");
  Prometheus prom(dir);
  ASSERT_EQ(prom.start(), "");
  const std::string serve = "net/http.(*conn).serve",
                    query = "github.com/prometheus/prometheus/web/api/v1.(*API).query",
                    not_found = "net/http.NotFound";
  constexpr int kRequests = 30;
  int answered = 0;
  std::string out = attached({"count", serve, query, not_found}, prom.service().pid(), dir, [&] {
    for (int i = 0; i < kRequests; ++i)
      answered += get_ok(prom.port(), "/api/v1/query?query=up", "\"status\":\"success\"");
  });
  ASSERT_EQ(answered, kRequests) << "requests failed while traced";
  Counts c = counts_in(out);
  ASSERT_TRUE(c.summary) << out;
  EXPECT_EQ((*c.summary)["lost"], 0) << out;
  EXPECT_EQ(c.of(serve), static_cast<uint64_t>(kRequests)) << out;
  EXPECT_EQ(c.of(query), static_cast<uint64_t>(kRequests)) << out;
  // Every request was answered 200: no call of NotFound happened (issue 19 item 5).
  EXPECT_EQ(c.of(not_found), 0u) << out;

  int after = 0;
  for (int i = 0; i < 20; ++i) after += get_ok(prom.port(), "/api/v1/query?query=up", "success");
  EXPECT_EQ(after, 20) << "prometheus stopped serving after gotap detached";
  EXPECT_TRUE(prom.service().alive());
}

// Values: each instant query's PromQL text reaches promql.(*Engine).NewInstantQuery as its
// string argument `qs`, once per request, as the test sent it.
TEST_P(RealPrograms, PrometheusQueriesAsSent) {
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
TEST_P(RealPrograms, PrometheusQueryTimesAsSent) {
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

std::string key_of(int i) {
  return "gotap/key_" + std::to_string(i);
}
std::string value_of(int i) {
  return "value " + std::to_string(i * 7919);
}

// K `etcdctl put` then K `etcdctl get`: the gRPC handlers kvServer.Put and kvServer.Range run
// once per request each.
TEST_P(RealPrograms, EtcdPutRangeCountsExact) {
  if (auto why = Etcd::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir("etcd-count");
  Etcd etcd(dir);
  ASSERT_EQ(etcd.start(), "");
  const std::string put = "go.etcd.io/etcd/etcdserver/api/v3rpc.(*kvServer).Put",
                    range = "go.etcd.io/etcd/etcdserver/api/v3rpc.(*kvServer).Range";
  constexpr int kKeys = 6;
  int stored = 0, read_back = 0;
  std::string out = attached({"count", put, range}, etcd.service().pid(), dir, [&] {
    for (int i = 0; i < kKeys; ++i) stored += etcd.ctl({"put", key_of(i), value_of(i)}) == "OK\n";
    for (int i = 0; i < kKeys; ++i)
      read_back += etcd.ctl({"get", key_of(i)}) == key_of(i) + "\n" + value_of(i) + "\n";
  });
  ASSERT_EQ(stored, kKeys);
  ASSERT_EQ(read_back, kKeys);
  Counts c = counts_in(out);
  ASSERT_TRUE(c.summary) << out;
  EXPECT_EQ((*c.summary)["lost"], 0) << out;
  EXPECT_EQ(c.of(put), static_cast<uint64_t>(kKeys)) << out;
  EXPECT_EQ(c.of(range), static_cast<uint64_t>(kKeys)) << out;

  EXPECT_EQ(etcd.ctl({"get", key_of(0)}), key_of(0) + "\n" + value_of(0) + "\n")
      << "etcd stopped serving after gotap detached";
  EXPECT_TRUE(etcd.service().alive());
}

// Values of a real program: etcd's key index takes each key put, as a []byte, with the
// revision etcd gives the put (mvcc treeIndex.Put(key []byte, rev revision)). The keys are
// what etcdctl sent, and each revision is the one etcd told etcdctl (`put -w json`).
TEST_P(RealPrograms, EtcdKeysAndRevisionsAsSent) {
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
          auto r = etcd.ctl({"put", "-w", "json", key_of(i), value_of(i)});
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
    EXPECT_EQ(traced_bytes(key), key_of(i)) << "put " << i << ": " << key;
    EXPECT_EQ(rev.value("main", json()), revisions[i]) << "put " << i << ": " << rev;
    EXPECT_EQ(rev.value("sub", json()), 0) << rev;
  }
  EXPECT_EQ(etcd.ctl({"get", key_of(1)}), key_of(1) + "\n" + value_of(1) + "\n");
  EXPECT_TRUE(etcd.service().alive());
}

// A hugo site of `pages` markdown pages under content/posts, with minimal layouts and only
// the page kinds a page needs (no taxonomies, feeds, sitemap, robots.txt or 404 page).
std::string page_body(int i) {
  return "body of **page " + std::to_string(i) + "**";
}
void write_site(const TempDir& dir, int pages) {
  write_text(dir / "site/config.toml",
             "baseURL = \"http://127.0.0.1/\"\ntitle = \"gotap\"\n"
             "disableKinds = [\"taxonomy\", \"term\", \"RSS\", \"sitemap\", \"robotsTXT\", "
             "\"404\"]\n");
  write_text(dir / "site/layouts/_default/single.html", "{{ .Content }}\n");
  write_text(dir / "site/layouts/_default/list.html", "{{ range .Pages }}{{ .Title }}\n{{ end }}");
  for (int i = 0; i < pages; ++i)
    write_text(dir / ("site/content/posts/p" + std::to_string(i) + ".md"),
               "---\ntitle: \"page " + std::to_string(i) + "\"\n---\n" + page_body(i) + "\n");
}

// `gotap count -- hugo` building a site of M pages: goldmark parses each page's markdown
// once, and hugo writes each page it renders once (Site.renderAndWritePage), which is M
// pages plus the home page and the section's list, as the files it wrote show.
TEST_P(RealPrograms, HugoBuildCountsPages) {
  const std::string hugo = debian_program("hugo");
  if (hugo.empty()) GTEST_SKIP() << "Debian's hugo is not installed (apt install hugo)";
  TempDir dir("hugo");
  constexpr int kPages = 7;
  write_site(dir, kPages);
  const std::string parse = "github.com/gohugoio/hugo/markup/goldmark.(*goldmarkConverter).Parse",
                    write_page = "github.com/gohugoio/hugo/hugolib.(*Site).renderAndWritePage";
  const std::string out = dir / "gotap.jsonl";
  RunResult r = run_command(
      {gotap_binary(), "count", "--backend", backend(), "--json", "-o", out, parse, write_page,
       "--", hugo, "--quiet", "--source", dir / "site", "--destination", dir / "public"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // What hugo wrote: every page, with its own content.
  size_t html = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path() / "public"))
    html += f.path().extension() == ".html";
  for (int i = 0; i < kPages; ++i)
    EXPECT_NE(read_file(dir / ("public/posts/p" + std::to_string(i) + "/index.html"))
                  .find("<strong>page " + std::to_string(i) + "</strong>"),
              std::string::npos);
  ASSERT_EQ(html, static_cast<size_t>(kPages + 2));
  Counts c = counts_in(read_file(out));
  ASSERT_TRUE(c.summary) << read_file(out);
  EXPECT_EQ((*c.summary)["lost"], 0);
  EXPECT_EQ((*c.summary)["exit_code"], 0);
  EXPECT_EQ(c.of(parse), static_cast<uint64_t>(kPages)) << read_file(out);
  EXPECT_EQ(c.of(write_page), html) << read_file(out);
}

// Values in a struct passed in seven registers: goldmark's Parse gets each page's
// converter.RenderContext, whose Src is the page's markdown after its front matter.
TEST_P(RealPrograms, HugoParseGetsEachPageSource) {
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

// `gotap count -- restic backup` of F new files: restic 0.14's archiver hands each regular
// file to its FileSaver once (FileSaver.Save, then saveFile in a worker), as restic's own
// summary (files_new) confirms.
TEST_P(RealPrograms, ResticBackupCountsFiles) {
  const std::string restic = debian_program("restic");
  if (restic.empty()) GTEST_SKIP() << "Debian's restic is not installed (apt install restic)";
  TempDir dir("restic");
  constexpr int kFiles = 9;
  for (int i = 0; i < kFiles; ++i)
    write_text(dir / ((i % 3 ? "data/" : "data/sub/") + std::string("f") + std::to_string(i)),
               "contents of file " + std::to_string(i) + "\n");
  write_text(dir / "password", "gotap-test-password\n");
  const std::vector<std::string> repo = {"-r", dir / "repo", "--password-file", dir / "password"};
  std::vector<std::string> init = {restic};
  init.insert(init.end(), repo.begin(), repo.end());
  init.push_back("init");
  RunResult ri = run_command(init, 60);
  ASSERT_EQ(ri.exit_code, 0) << ri.err;

  const std::string save = "github.com/restic/restic/internal/archiver.(*FileSaver).Save",
                    save_file = "github.com/restic/restic/internal/archiver.(*FileSaver).saveFile";
  const std::string out = dir / "gotap.jsonl";
  std::vector<std::string> argv = {gotap_binary(), "count", "--backend", backend(),
                                   "--json",       "-o",    out,         save,
                                   save_file,      "--",    restic};
  argv.insert(argv.end(), repo.begin(), repo.end());
  argv.insert(argv.end(), {"backup", "--json", dir / "data"});
  RunResult r = run_command(argv, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::optional<int64_t> files_new;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    json j = json::parse(l, nullptr, false);
    if (j.is_object() && j.value("message_type", "") == "summary")
      files_new = j["files_new"].get<int64_t>();
  }
  ASSERT_EQ(files_new, kFiles) << r.out;
  Counts c = counts_in(read_file(out));
  ASSERT_TRUE(c.summary) << read_file(out);
  EXPECT_EQ((*c.summary)["lost"], 0);
  EXPECT_EQ((*c.summary)["exit_code"], 0);
  EXPECT_EQ(c.of(save), static_cast<uint64_t>(kFiles)) << read_file(out);
  EXPECT_EQ(c.of(save_file), static_cast<uint64_t>(kFiles)) << read_file(out);
}

// Values: restic's archiver builds each item's node from its file info once
// ((*Archiver).nodeFromFileInfo(filename string, fi os.FileInfo)): the names are those of
// the directory given to `restic backup` and everything in it, each once.
TEST_P(RealPrograms, ResticBackupFileNamesAsGiven) {
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
TEST_P(RealPrograms, CaddyPathsAndStatusesAsLogged) {
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
TEST(RealProgramValues, ReadEveryFormTheyAccept) {
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
  EXPECT_EQ(traced_duration_ns("soon"), std::nullopt);
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":2,"cap":8,"elems":[104,105]})")), "hi");
  EXPECT_EQ(traced_bytes("hi"), "hi");
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":5,"cap":8,"elems":[],"truncated":true})")),
            std::nullopt);
  EXPECT_EQ(traced_bytes(json::parse(R"({"len":3,"cap":8,"elems":[104,105]})")), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(Backends, RealPrograms, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
