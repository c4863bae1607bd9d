// Inlined calls in a real program: Debian's stripped prometheus (Go 1.19) inlines
// net/http.NotFound into StripPrefix's handler, after two TrimPrefix calls, in the branch no
// API request takes. gotap once counted every request there as a NotFound call. Ground truth
// is what the server answered: a NotFound call writes "404 page not found", and nothing else
// in prometheus writes that body.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
constexpr const char* kPrometheus = "/usr/bin/prometheus";

// prometheus on a free loopback port with an empty config and a fresh TSDB directory.
class PrometheusServer {
 public:
  ~PrometheusServer() { stop(); }
  std::string start() {
    dir_ = fs::temp_directory_path() / ("gotap-prom-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "prometheus.yml")
        << "global:\n  scrape_interval: 1h\nscrape_configs: []\n";
    port_ = free_port();
    srv_ = spawn({kPrometheus, "--config.file=" + (dir_ / "prometheus.yml").string(),
                  "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                  "--storage.tsdb.path=" + (dir_ / "data").string()});
    if (srv_.pid <= 0) return "prometheus did not start";
    for (int i = 0; i < 300; ++i) {
      auto r = http_get(port_, "/-/ready");
      if (r && r->rfind("HTTP/1.1 200", 0) == 0) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "prometheus was not ready within 30 s";
  }
  void stop() {
    if (srv_.pid > 0) {
      kill(srv_.pid, SIGTERM);
      waitpid(srv_.pid, nullptr, 0);
      srv_.pid = -1;
    }
    if (!dir_.empty()) fs::remove_all(dir_);
    dir_.clear();
  }
  int port() const { return port_; }
  pid_t pid() const { return srv_.pid; }

 private:
  fs::path dir_;
  int port_ = 0;
  Child srv_;
};

class RealInlined : public ::testing::TestWithParam<std::string> {};

TEST_P(RealInlined, PrometheusNotFoundCountsOnlyRealNotFounds) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
  if (!file_exists(kPrometheus))
    GTEST_SKIP() << "Debian's prometheus is not installed (apt install prometheus)";
  ASSERT_TRUE(file_exists(gotap_binary())) << gotap_binary();
  PrometheusServer srv;
  std::string err = srv.start();
  ASSERT_TRUE(err.empty()) << err;

  Child tracer = spawn({gotap_binary(), "count", "--json", "--backend", GetParam(), "-p",
                        std::to_string(srv.pid()), "net/http.NotFound"});
  ASSERT_GT(tracer.pid, 0);
  std::string tracer_err = read_until(tracer.err, "Tracing", 30000);
  ASSERT_NE(tracer_err.find("Tracing"), std::string::npos) << tracer_err;

  // 20 API requests (served, through StripPrefix), then 3 requests for pages that do not
  // exist (answered by NotFound).
  int ok = 0, not_found = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = http_get(srv.port(), "/api/v1/query?query=up");
    ok += r && r->rfind("HTTP/1.1 200", 0) == 0;
  }
  for (int i = 0; i < 3; ++i) {
    auto r = http_get(srv.port(), "/gotap-no-such-page-" + std::to_string(i));
    not_found += r && r->rfind("HTTP/1.1 404", 0) == 0 &&
                 r->find("\r\n\r\n404 page not found\n") != std::string::npos;
  }
  EXPECT_EQ(ok, 20);
  EXPECT_EQ(not_found, 3);

  kill(tracer.pid, SIGINT);
  std::string out = read_all(tracer.out);
  int status = 0;
  waitpid(tracer.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_all(tracer.err);
  auto counts = events_in(out, "count");
  ASSERT_EQ(counts.size(), 1u) << out;
  EXPECT_EQ(counts[0]["func"], "net/http.NotFound");
  EXPECT_EQ(counts[0]["count"].get<int>(), not_found) << out;
  auto summary = events_in(out, "summary");
  ASSERT_EQ(summary.size(), 1u) << out;
  EXPECT_EQ(summary[0]["lost"], 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, RealInlined, ::testing::Values("ptrace", "ebpf"),
                         [](const auto& i) { return i.param; });

}  // namespace
}  // namespace gotap::testing
