// `--prometheus ADDR` scraped by Debian's own Prometheus server on loopback, once per backend:
// what Prometheus's query API returns must be what the traced program really did (the
// latency fixture's ground truth; the requests rclone served) and agree with the
// `latency --json` output of the same run. Also the CLI's errors for a bad ADDR.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/ebpf/ebpf_backend.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kPrometheus = "/usr/bin/prometheus";

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// An HTTP/1.1 response's body, de-chunked when Transfer-Encoding is chunked.
std::string http_body(const std::string& resp) {
  size_t start = resp.find("\r\n\r\n");
  if (start == std::string::npos) return "";
  const std::string head = resp.substr(0, start);
  std::string rest = resp.substr(start + 4);
  if (head.find("Transfer-Encoding: chunked") == std::string::npos) return rest;
  std::string body;
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t eol = rest.find("\r\n", pos);
    if (eol == std::string::npos) break;
    size_t n = std::stoul(rest.substr(pos, eol - pos), nullptr, 16);
    if (n == 0) break;
    body += rest.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return body;
}

// Waits up to timeout_s for pid; its wait status, or -1 (then it is killed).
int wait_exit(pid_t pid, int timeout_s) {
  const auto until = Clock::now() + std::chrono::seconds(timeout_s);
  int st = 0;
  while (Clock::now() < until) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

// The log2 buckets of a `latency` event as cumulative counts by upper bound in seconds, the
// way Prometheus reports a histogram's `le` buckets.
std::map<double, uint64_t> cumulative_from_json(const json& latency, double* total) {
  std::map<double, uint64_t> out;
  uint64_t sum = 0;
  for (const auto& b : latency["buckets"]) sum += b["count"].get<uint64_t>();
  *total = static_cast<double>(sum);
  for (int k = 1; k <= 40; ++k) {
    const uint64_t bound = uint64_t{1} << k;
    uint64_t c = 0;
    for (const auto& b : latency["buckets"])
      if (b["hi_ns"].get<uint64_t>() <= bound) c += b["count"].get<uint64_t>();
    out[static_cast<double>(bound) / 1e9] = c;
  }
  return out;
}

class Prometheus : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (!file_exists(kPrometheus))
      GTEST_SKIP() << "no " << kPrometheus << " (Debian package prometheus)";
    if (GetParam() == "ebpf") {
      std::string why = ebpf::unavailable_reason();
      if (!why.empty()) GTEST_SKIP() << "BPF unavailable: " << why;
    }
    dir_ = fs::temp_directory_path() / ("gotap-prom-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tsdb");
    gotap_port_ = free_port();
    prom_port_ = free_port();
    std::ofstream(dir_ / "prometheus.yml") << "global:\n"
                                              "  scrape_interval: 1s\n"
                                              "  scrape_timeout: 1s\n"
                                              "scrape_configs:\n"
                                              "  - job_name: gotap\n"
                                              "    static_configs:\n"
                                              "      - targets: ['127.0.0.1:"
                                           << gotap_port_ << "']\n";
    prom_ = spawn({kPrometheus, "--config.file=" + (dir_ / "prometheus.yml").string(),
                   "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
                   "--web.listen-address=127.0.0.1:" + std::to_string(prom_port_),
                   "--log.level=error"});
    ASSERT_GT(prom_.pid, 0);
    bool ready = false;
    for (int i = 0; i < 300 && !ready; ++i) {
      auto r = http_get(prom_port_, "/-/ready");
      ready = r && r->rfind("HTTP/1.1 200", 0) == 0;
      if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(ready) << "prometheus did not become ready";
  }
  void TearDown() override {
    if (prom_.pid > 0) {
      kill(prom_.pid, SIGTERM);
      if (wait_exit(prom_.pid, 30) == -1) ADD_FAILURE() << "prometheus did not stop";
      close(prom_.out);
      close(prom_.err);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The instant vector of `promql` from Prometheus's query API.
  json query(const std::string& promql) {
    auto r = http_get(prom_port_, "/api/v1/query?query=" + url_encode(promql));
    if (!r) return json::array();
    auto j = json::parse(http_body(*r), nullptr, false);
    if (j.is_discarded() || j["status"] != "success") return json::array();
    return j["data"]["result"];
  }
  // The one value of `promql`, or nullopt. last_over_time: after gotap exits, the failed
  // scrapes mark its series stale, and an instant query would find nothing.
  std::optional<double> value(const std::string& selector) {
    json v = query("last_over_time(" + selector + "[10m])");
    if (v.size() != 1) return std::nullopt;
    return std::stod(v[0]["value"][1].get<std::string>());
  }
  // Polls until `selector` reads `want` (true) or 30 s pass (false).
  bool eventually(const std::string& selector, double want) {
    for (auto until = Clock::now() + std::chrono::seconds(30); Clock::now() < until;) {
      if (value(selector) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return false;
  }
  // The histogram's buckets by upper bound (+Inf as infinity).
  std::map<double, uint64_t> buckets(const std::string& labels) {
    std::map<double, uint64_t> out;
    for (const auto& s :
         query("last_over_time(gotap_call_duration_seconds_bucket" + labels + "[10m])")) {
      std::string le = s["metric"]["le"];
      double bound = le == "+Inf" ? INFINITY : std::stod(le);
      out[bound] = static_cast<uint64_t>(std::stod(s["value"][1].get<std::string>()));
    }
    return out;
  }
  // Prometheus's buckets equal those of the `latency` event of the same run.
  void expect_histogram_matches(const std::string& labels, const json& latency) {
    double total = 0;
    auto want = cumulative_from_json(latency, &total);
    auto got = buckets(labels);
    ASSERT_EQ(got.size(), want.size() + 1) << labels;
    for (const auto& [le, n] : want) {
      auto it = got.lower_bound(le * (1 - 1e-9));
      ASSERT_NE(it, got.end()) << le;
      EXPECT_NEAR(it->first, le, le * 1e-9);
      EXPECT_EQ(it->second, n) << "le=" << le;
    }
    EXPECT_EQ(got[INFINITY], static_cast<uint64_t>(total));
    EXPECT_EQ(value("gotap_call_duration_seconds_count" + labels), total);
  }

  fs::path dir_;
  int gotap_port_ = 0, prom_port_ = 0;
  Child prom_;
};

// The latency fixture parks for 1, 8 and 30 ms and prints how often it did each ("GT park MS
// N"). gotap launches it and lingers after it exits until Prometheus has scraped the final
// values.
TEST_P(Prometheus, FixtureCountsAndHistogramMatchGroundTruth) {
  auto fixtures = all_fixtures("latency");
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixtures built";
  const Fixture& fx = fixtures.back();
  const std::string out_file = (dir_ / "gotap.json").string();
  RunResult r =
      run_command({gotap_binary(), "latency", "--backend", GetParam(), "--json", "-o", out_file,
                   "--prometheus", "127.0.0.1:" + std::to_string(gotap_port_),
                   "--prometheus-linger", "60", "main.park", "--", fx.path, "park", "6", "4"},
                  180);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("serving metrics on http://127.0.0.1:"), std::string::npos) << r.err;
  std::map<int, uint64_t> gt;
  uint64_t total = 0;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    int ms = 0;
    unsigned long long n = 0;
    if (sscanf(l.c_str(), "GT park %d %llu", &ms, &n) == 2) {
      gt[ms] = n;
      total += n;
    }
  }
  ASSERT_EQ(gt.size(), 3u) << r.out;
  const std::string out = read_file(out_file);
  auto summary = events_in(out, "summary");
  auto latency = events_in(out, "latency");
  ASSERT_EQ(summary.size(), 1u) << out;
  ASSERT_EQ(latency.size(), 1u) << out;
  EXPECT_EQ(latency[0]["count"].get<uint64_t>(), total);

  const std::string labels = "{func=\"main.park\",binary=\"latency\",pid=\"" +
                             std::to_string(summary[0]["pid"].get<int>()) + "\"}";
  ASSERT_TRUE(eventually("gotap_calls_total" + labels, static_cast<double>(total)))
      << "want " << total << ", Prometheus has "
      << value("gotap_calls_total" + labels).value_or(-1);
  EXPECT_EQ(value("gotap_lost_events_total{binary=\"latency\"}"), 0.0);
  expect_histogram_matches(labels, latency[0]);
  // Every call parked at least 1 ms; the 30 ms ones took longer than 2^24 ns (16.8 ms).
  auto b = buckets(labels);
  EXPECT_EQ(b[0.000524288], 0u);
  EXPECT_GE(b[INFINITY] - b[0.016777216], gt[30]);
}

// Debian's stripped rclone, attached by pid under loopback load: Prometheus sees exactly
// one net/http.(*conn).serve call per request while gotap is still tracing, and its
// histogram is the one `latency --json` prints at the end.
TEST_P(Prometheus, StrippedServerCountsWhileTracing) {
  if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  RcloneServer srv;
  std::string srv_err = srv.start("gotap-prom-rclone");
  ASSERT_TRUE(srv_err.empty()) << srv_err;

  const std::string fn = "net/http.(*conn).serve";
  const std::string out_file = (dir_ / "gotap.json").string();
  Child tap = spawn({gotap_binary(), "latency", "--backend", GetParam(), "--json", "-o", out_file,
                     "--prometheus", "127.0.0.1:" + std::to_string(gotap_port_), "-p",
                     std::to_string(srv.pid()), fn});
  ASSERT_GT(tap.pid, 0);
  std::string err = read_until(tap.err, "Tracing ", 60000);
  ASSERT_NE(err.find("Tracing "), std::string::npos) << err;
  constexpr int kClients = 4, kRequests = 200;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&] {
      for (int i = 0; i < kRequests / kClients; ++i) ok += srv.serves_page();
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), kRequests);

  const std::string labels =
      "{func=\"" + fn + "\",binary=\"rclone\",pid=\"" + std::to_string(srv.pid()) + "\"}";
  // Each connection's goroutine returns from serve once the client has closed it.
  EXPECT_TRUE(eventually("gotap_calls_total" + labels, kRequests))
      << value("gotap_calls_total" + labels).value_or(-1);
  EXPECT_TRUE(eventually("gotap_call_duration_seconds_count" + labels, kRequests))
      << value("gotap_call_duration_seconds_count" + labels).value_or(-1);
  EXPECT_EQ(value("gotap_lost_events_total{binary=\"rclone\"}"), 0.0);

  kill(tap.pid, SIGINT);
  err += read_all(tap.err);
  int st = wait_exit(tap.pid, 60);
  EXPECT_TRUE(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << err;
  close(tap.out);
  close(tap.err);
  auto latency = events_in(read_file(out_file), "latency");
  ASSERT_EQ(latency.size(), 1u);
  EXPECT_EQ(latency[0]["count"].get<uint64_t>(), static_cast<uint64_t>(kRequests));
  expect_histogram_matches(labels, latency[0]);
  // Detached: the server serves on.
  EXPECT_TRUE(srv.serves_page());
  srv.stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, Prometheus, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

// Of six traced functions the errors fixture's "fail" mode calls three, and prints how often
// it called each ("gt calls func=F made=N failed=M"): the last scrape (the final values,
// served once while gotap lingers) has series for exactly those, with their counts; the
// three never called have none (a whole binary's scrape was 2 million lines of zeros).
class PrometheusSeries : public ::testing::TestWithParam<std::string> {};

TEST_P(PrometheusSeries, OnlyCalledFunctionsHaveSeries) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (GetParam() == "ebpf") {
    std::string why = ebpf::unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << "BPF unavailable: " << why;
  }
  // A DWARF build: its functions' error results are known, so failed calls are counted.
  std::string bin;
  for (const auto& f : all_fixtures("errors"))
    if (f.flavour == "default") bin = f.path;
  if (bin.empty()) GTEST_SKIP() << "no errors fixtures built";
  const int port = free_port();
  Child g =
      spawn({gotap_binary(), "latency", "--backend", GetParam(), "--prometheus",
             ":" + std::to_string(port), "--prometheus-linger", "30", "main.mayFail", "main.parse",
             "main.plain", "main.hot", "main.c", "main.cold", "--", bin, "fail", "30"});
  ASSERT_GT(g.pid, 0);
  const std::string err = read_until(g.err, "/metrics\n", 30000);
  ASSERT_NE(err.find("serving metrics"), std::string::npos) << err;
  // Scrape until gotap has served the final values and gone: the last answer holds them.
  std::string last;
  for (auto until = Clock::now() + std::chrono::seconds(60); Clock::now() < until;) {
    auto r = http_get(port, "/metrics");
    if (!r) break;
    if (r->rfind("HTTP/1.1 200", 0) == 0) last = http_body(*r);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(wait_exit(g.pid, 30), -1);
  const std::string out = read_all(g.out);
  close(g.out);
  close(g.err);

  std::map<std::string, uint64_t> made, failed;  // the program's account
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    char func[64];
    unsigned long long n = 0, f = 0;
    const int got = sscanf(l.c_str(), "gt calls func=%63s made=%llu failed=%llu", func, &n, &f);
    if (got >= 2) made[func] = n;
    if (got == 3) failed[func] = f;
  }
  ASSERT_EQ(made.size(), 3u) << out;

  // family -> func -> value, of the per-function series (histograms by their _count).
  std::map<std::string, std::map<std::string, double>> series;
  const std::regex sample(R"re(^(gotap_[a-z_]+)\{(.*)\} (\S+)$)re");
  const std::regex func_label(R"re(func="([^"]*)")re");
  std::istringstream scrape(last);
  for (std::string l; std::getline(scrape, l);) {
    std::smatch m, f;
    if (!std::regex_match(l, m, sample)) continue;
    const std::string all = m[2].str();
    if (!std::regex_search(all, f, func_label)) continue;
    if (m[1] == "gotap_call_duration_seconds_bucket") continue;
    series[m[1].str()][f[1].str()] = std::stod(m[3].str());
  }
  std::map<std::string, double> want_calls;
  for (const auto& [func, n] : made) want_calls[func] = static_cast<double>(n);
  EXPECT_EQ(series["gotap_calls_total"], want_calls) << last;
  EXPECT_EQ(series["gotap_call_duration_seconds_count"], want_calls) << last;
  // mayFail and parse have an error result; plain has none, so no error series either.
  std::map<std::string, double> want_failed;
  for (const auto& [func, n] : failed) want_failed[func] = static_cast<double>(n);
  EXPECT_EQ(series["gotap_call_errors_total"], want_failed) << last;
  for (const char* never : {"main.hot", "main.c", "main.cold"})
    EXPECT_EQ(last.find(std::string("func=\"") + never + "\""), std::string::npos) << never;
}

INSTANTIATE_TEST_SUITE_P(Backends, PrometheusSeries, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

// A bad ADDR and a port in use: one line, exit 2, before anything is traced.
TEST(PrometheusCli, BadAddressAndPortInUse) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = all_fixtures("latency");
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixtures built";
  const std::string bin = fixtures.back().path;
  for (const std::string addr : {"nope", "127.0.0.1:99999", "127.0.0.1", "example:80", "[::1]"}) {
    RunResult r = run_command(
        {gotap_binary(), "count", "--prometheus", addr, "main.park", "--", bin, "park", "1", "1"});
    EXPECT_EQ(r.exit_code, 2) << addr;
    EXPECT_EQ(r.err.rfind("gotap: bad --prometheus address '" + addr + "'", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // IPv6 needs a civetweb built with it: refused in one line when it is not, served when it is.
  RunResult v6 = run_command({gotap_binary(), "count", "--prometheus", "[::1]:0", "main.park", "--",
                              bin, "park", "1", "1"});
  if (v6.exit_code == 2) {
    EXPECT_NE(v6.err.find("no IPv6 support"), std::string::npos) << v6.err;
    EXPECT_EQ(std::count(v6.err.begin(), v6.err.end(), '\n'), 1) << v6.err;
  } else {
    EXPECT_EQ(v6.exit_code, 0) << v6.err;
    EXPECT_NE(v6.err.find("serving metrics on http://[::1]:"), std::string::npos) << v6.err;
  }
  // --all has no one pid to label the series with.
  RunResult all = run_command({gotap_binary(), "count", "--prometheus", "127.0.0.1:1", "--all",
                               "--binary", bin, "main.park"});
  EXPECT_EQ(all.exit_code, 2) << all.err;
  EXPECT_NE(all.err.find("--prometheus needs one process"), std::string::npos) << all.err;

  // A port someone else listens on.
  int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  socklen_t len = sizeof a;
  getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  RunResult busy = run_command({gotap_binary(), "count", "--backend", "ptrace", "--prometheus",
                                "127.0.0.1:" + port, "main.park", "--", bin, "park", "1", "1"});
  EXPECT_EQ(busy.exit_code, 2) << busy.err;
  EXPECT_NE(busy.err.find("gotap: cannot serve metrics on 127.0.0.1:" + port +
                          ": Address already in use\n"),
            std::string::npos)
      << busy.err;
  // Nothing was launched: the fixture's output is absent.
  EXPECT_EQ(busy.out.find("done"), std::string::npos) << busy.out;
  close(holder);
}

// The addresses /proc/net/tcp lists a socket listening on `port` at (IPv4, as the kernel
// prints them: "0100007F" is 127.0.0.1).
std::vector<std::string> listening_on(int port) {
  std::vector<std::string> out;
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  char want[8];
  snprintf(want, sizeof want, "%04X", port);
  while (std::getline(tcp, line)) {
    std::istringstream ls(line);
    std::string slot, local, remote, state;
    ls >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() == 13 && local.substr(9) == want)
      out.push_back(local.substr(0, 8));
  }
  return out;
}

// An IPv4 address of this machine that is not loopback, or "".
std::string non_loopback_ipv4() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string found;
  for (ifaddrs* i = all; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const in_addr a = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if ((ntohl(a.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN];
    found = inet_ntop(AF_INET, &a, buf, sizeof buf);
  }
  freeifaddrs(all);
  return found;
}

int connect_to(const std::string& ip, int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return -1;
  }
  return s;
}

// `--prometheus :PORT` listens on loopback only, and clients that connect and send nothing
// (250 of them, more than any worker count) do not keep a scrape from being answered: each
// holds a worker for a bounded time at most.
TEST(PrometheusListener, LoopbackByDefaultIdleClientsDoNotBlockScrapes) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = all_fixtures("latency");
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixtures built";
  const int port = free_port();
  // The program parks for about 4 s, then gotap ends with it.
  Child g = spawn({gotap_binary(), "count", "--backend", "ptrace", "--prometheus",
                   ":" + std::to_string(port), "main.park", "--", fixtures.back().path, "park", "1",
                   "100"});
  ASSERT_GT(g.pid, 0);
  const std::string err = read_until(g.err, "/metrics\n", 30000);
  const std::string where =
      "gotap: serving metrics on http://127.0.0.1:" + std::to_string(port) + "/metrics\n";
  EXPECT_NE(err.find(where), std::string::npos) << err;
  // The kernel's view: one listener, on 127.0.0.1.
  EXPECT_EQ(listening_on(port), std::vector<std::string>{"0100007F"});
  if (const std::string ip = non_loopback_ipv4(); !ip.empty()) {
    const int s = connect_to(ip, port);
    EXPECT_LT(s, 0) << "reachable on " << ip;
    if (s >= 0) close(s);
  }

  std::vector<int> idle;
  for (int i = 0; i < 250; ++i)
    if (int s = connect_to("127.0.0.1", port); s >= 0) idle.push_back(s);
  EXPECT_EQ(idle.size(), 250u);
  const auto t0 = Clock::now();
  const auto r = http_get(port, "/metrics");
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(r && r->rfind("HTTP/1.1 200", 0) == 0 &&
              r->find("gotap_lost_events_total{") != std::string::npos)
      << (r ? r->substr(0, 300) : "no answer");
  EXPECT_LT(took, 3.0) << "a scrape behind 250 idle connections took " << took << " s";
  for (int s : idle) close(s);

  EXPECT_NE(wait_exit(g.pid, 30), -1);
  close(g.out);
  close(g.err);
}

}  // namespace
}  // namespace gotap::testing
