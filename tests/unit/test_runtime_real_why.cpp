// `gotap trace --why` on a real program, once per backend: Debian's stripped caddy as a
// reverse proxy in front of an upstream that answers each request 60 ms after reading it
// (tests/tools/slow-upstream.py), attached with -p. Every call of the reverse proxy's
// (*Handler).ServeHTTP spends those 60 ms parked in net/http.(*persistConn).roundTrip's
// select until the transport's read loop, the goroutine that reads the upstream's
// connection, hands it the response: each call must show at least 50 ms of it, woken by
// net/http.(*persistConn).readLoop. The truth gotap did not produce: the upstream's delay,
// and its own count of the responses it sent.
#include <unistd.h>

#include <algorithm>
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

constexpr double kMs = 1e6;
constexpr int kDelayMs = 60;

// The upstream: the slow-upstream script on a free loopback port.
class SlowUpstream {
 public:
  explicit SlowUpstream(const TempDir& dir) : dir_(dir) {}
  // "" once it listens, else why not (up to 10 s).
  std::string start(int delay_ms) {
    port_ = free_port();
    std::string err = srv_.start(
        {debian_program("python3"), std::string(GOTAP_SOURCE_DIR) + "/tests/tools/slow-upstream.py",
         "127.0.0.1:" + std::to_string(port_), std::to_string(delay_ms)},
        dir_ / "upstream.log");
    if (!err.empty()) return err;
    if (!wait_until(10000, [&] { return log().find("listening on ") != std::string::npos; }))
      return "the upstream did not listen: " + log();
    return "";
  }
  int port() const { return port_; }
  std::string log() const { return read_file(dir_ / "upstream.log"); }
  // The responses it has sent so far.
  int answered() const {
    int n = 0;
    std::istringstream in(log());
    for (std::string l; std::getline(in, l);) n += l.rfind("answered ", 0) == 0;
    return n;
  }

 private:
  const TempDir& dir_;
  int port_ = 0;
  Service srv_;
};

class RealWhy : public RealProgramTest {};

// A string member, or "" where it is absent or null: a wait's reason, place and waker's
// function are each null when gotap could not read them (docs/json.md).
std::string text(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

TEST_P(RealWhy, CaddyProxyWaitsForTheUpstreamWokenByReadLoop) {
  if (auto why = Caddy::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (debian_program("python3").empty()) GTEST_SKIP() << "no python3 for the upstream";
  TempDir dir("caddy-why");
  SlowUpstream upstream(dir);
  ASSERT_EQ(upstream.start(kDelayMs), "");
  Caddy caddy(dir);
  ASSERT_EQ(caddy.start_reverse_proxy(upstream.port(), "slow upstream"), "");
  const std::string handler =
      "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy.(*Handler).ServeHTTP";
  constexpr int kRequests = 6;
  int proxied = 0, answered = 0;
  const std::string out = attached({"trace", "--why", handler}, caddy.service().pid(), dir, [&] {
    const int before = upstream.answered();
    for (int i = 0; i < kRequests; ++i) proxied += get_ok(caddy.port(), "/", "slow upstream");
    // The upstream logs a response after writing it: the client may have it first.
    wait_until(5000, [&] { return upstream.answered() - before >= kRequests; });
    answered = upstream.answered() - before;
  });
  ASSERT_EQ(proxied, kRequests) << "requests failed while traced";
  ASSERT_EQ(answered, kRequests) << upstream.log();

  int returns = 0;
  for (const json& e : events_in(out, "return")) {
    if (text(e, "func") != handler) continue;
    ++returns;
    SCOPED_TRACE(e.dump());
    ASSERT_TRUE(e.contains("why") && e["why"].is_object());
    const json& why = e["why"];
    ASSERT_TRUE(why["waiting_ns"].is_number());
    EXPECT_GE(why["waiting_ns"].get<double>(), 50 * kMs);
    EXPECT_LE(why["waiting_ns"].get<double>(), e["duration_ns"].get<double>());
    // The wait for the response: the select of the transport's round trip, woken by the
    // read loop of the upstream's connection.
    double for_response = 0;
    for (const json& w : why.value("waits", json::array()))
      if (text(w, "reason") == "select" &&
          text(w, "parked_at") == "net/http.(*persistConn).roundTrip" &&
          w["woken_by"].is_object() &&
          text(w["woken_by"], "func") == "net/http.(*persistConn).readLoop" &&
          w["woken_by"]["goid"].is_number() && w["woken_by"]["goid"].get<long>() > 0)
        for_response += w["ns"].get<double>();
    EXPECT_GE(for_response, 50 * kMs) << "the wait for the upstream's response";
  }
  EXPECT_EQ(returns, kRequests) << out;
  const auto summary = events_in(out, "summary");
  ASSERT_EQ(summary.size(), 1u) << out;
  EXPECT_EQ(summary[0]["lost"], 0);

  EXPECT_TRUE(get_ok(caddy.port(), "/", "slow upstream"))
      << "caddy stopped proxying after gotap detached";
  EXPECT_TRUE(caddy.service().alive());
}

INSTANTIATE_TEST_SUITE_P(Backends, RealWhy, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
