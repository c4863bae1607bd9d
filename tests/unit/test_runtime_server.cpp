// A stripped Go server from a Debian package (rclone, `rclone serve http`), attached by pid
// under load on loopback, once per backend: `gotap count -p PID` must count exactly the
// connections it served while tracing, `gotap goroutines -p PID` must see each connection's
// goroutine created and exit, and the server must keep serving after gotap detaches. This is the
// production case: no DWARF, no symbols, a program we did not write.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A child process with its stdout and stderr on pipes.
struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;
};

Child spawn(const std::vector<std::string>& argv) {
  int o[2], e[2];
  if (pipe2(o, O_CLOEXEC) != 0 || pipe2(e, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(o[1], 1);
    dup2(e[1], 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  close(o[1]);
  close(e[1]);
  return {pid, o[0], e[0]};
}

// Reads fd until `needle` shows up or the deadline passes; returns what was read.
std::string read_until(int fd, const std::string& needle, int timeout_ms) {
  std::string got;
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got.find(needle) == std::string::npos && Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (poll(&p, 1, std::max(left, 0)) <= 0) break;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, n);
  }
  return got;
}

std::string read_all(int fd) {
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) got.append(buf, n);
  return got;
}

// A free loopback port (bound and released; the server takes it right after).
int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

// One HTTP/1.1 GET on a connection of its own; the whole response, or nullopt.
std::optional<std::string> http_get(int port, const std::string& path) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return std::nullopt;
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (write(s, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(s);
    return std::nullopt;
  }
  std::string resp = read_all(s);
  close(s);
  return resp;
}

bool served_ok(const std::optional<std::string>& r, const std::string& body) {
  return r && r->rfind("HTTP/1.1 200", 0) == 0 && r->size() >= body.size() &&
         r->compare(r->size() - body.size(), body.size(), body) == 0;
}

std::string rclone_path() {
  for (const auto& rb : real_binaries())
    if (rb.name == "rclone") return rb.path;
  return "";
}

// rclone serving a directory on a free loopback port, for the length of a test.
class AttachedServer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    std::string rclone = rclone_path();
    if (rclone.empty())
      GTEST_SKIP() << "no rclone from Debian (tests/tools/fetch-real-binaries.sh)";
    dir_ = fs::temp_directory_path() / ("gotap-srv-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "page.txt") << kBody;
    port_ = free_port();
    srv_ = spawn({rclone, "serve", "http", dir_.string(), "--addr",
                  "127.0.0.1:" + std::to_string(port_), "--config", "/dev/null"});
    ASSERT_GT(srv_.pid, 0);
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      up = served_ok(http_get(port_, "/page.txt"), kBody);
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(up) << "rclone serve http did not come up";
  }
  void TearDown() override {
    if (srv_.pid > 0) {
      kill(srv_.pid, SIGTERM);
      waitpid(srv_.pid, nullptr, 0);
      close(srv_.out);
      close(srv_.err);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Attaches `gotap ARGS -p PID`, serves kRequests requests from four clients at once, each
  // on a fresh connection, then stops gotap with SIGINT; returns its output. That goes to a
  // file: a full pipe nobody reads would stop gotap, and with ptrace the server with it.
  std::string trace_under_load(std::vector<std::string> args) {
    const std::string out_file = (dir_ / "gotap.out").string();
    args.insert(args.begin(), gotap_binary());
    args.insert(args.end(), {"-o", out_file, "-p", std::to_string(srv_.pid)});
    Child tap = spawn(args);
    EXPECT_GT(tap.pid, 0);
    std::string err = read_until(tap.err, "Tracing ", 60000);
    EXPECT_NE(err.find("Tracing "), std::string::npos) << err;
    std::atomic<int> ok_traced{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c)
      clients.emplace_back([&] {
        for (int i = 0; i < kRequests / kClients; ++i)
          ok_traced += served_ok(http_get(port_, "/page.txt"), kBody);
      });
    for (auto& t : clients) t.join();
    EXPECT_EQ(ok_traced.load(), kRequests) << "requests failed while traced";
    // Each connection's goroutine ends after its last response: let the last ones go.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(tap.pid, SIGINT);
    err += read_all(tap.err);
    int st = 0;
    EXPECT_EQ(waitpid(tap.pid, &st, 0), tap.pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << err;
    close(tap.out);
    close(tap.err);
    return read_file(out_file);
  }

  // Detached: the server runs on, untouched, and serves every request.
  void expect_serves_after_detach() {
    int ok = 0;
    for (int i = 0; i < 50; ++i) ok += served_ok(http_get(port_, "/page.txt"), kBody);
    EXPECT_EQ(ok, 50);
    EXPECT_EQ(kill(srv_.pid, 0), 0) << "the server died";
  }

  static constexpr int kClients = 4, kRequests = 400;
  static constexpr const char* kBody = "served by a stripped Go program\n";
  fs::path dir_;
  int port_ = 0;
  Child srv_;
};

TEST_P(AttachedServer, ExactCountsAndServesAfterDetach) {
  // One connection per request, so net/http.(*conn).serve runs exactly once per request.
  const std::string fn = "net/http.(*conn).serve";
  std::string out = trace_under_load({"count", "--backend", GetParam(), "--json", fn});
  std::optional<uint64_t> count, lost;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    auto j = json::parse(l, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << l;
    if (j["event"] == "count" && j["func"] == fn) count = j["count"].get<uint64_t>();
    if (j["event"] == "summary") lost = j["lost"].get<uint64_t>();
  }
  ASSERT_TRUE(lost) << out;
  EXPECT_EQ(*lost, 0u);
  ASSERT_TRUE(count) << out;
  EXPECT_EQ(*count, static_cast<uint64_t>(kRequests));
  expect_serves_after_detach();
}

// Attached to a running server, `gotap goroutines` sees each connection's goroutine created
// by net/http.(*Server).Serve on the accepting goroutine (which existed before the attach),
// and its exit.
TEST_P(AttachedServer, GoroutinePerConnectionCreatedAndExited) {
  std::string out = trace_under_load({"goroutines", "--backend", GetParam(), "--json"});
  std::set<uint64_t> created, exited, parents;
  std::map<uint64_t, std::string> first_func;  // a goroutine's start function, first given
  std::optional<uint64_t> lost;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    auto j = json::parse(l, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << l;
    if (j["event"] == "gcreate" && j.value("created_by", "") == "net/http.(*Server).Serve") {
      created.insert(j["goid"].get<uint64_t>());
      parents.insert(j["parent_goid"].get<uint64_t>());
    }
    if (j["event"] == "gexit") exited.insert(j["goid"].get<uint64_t>());
    if (j.contains("func")) first_func.emplace(j["goid"].get<uint64_t>(), j["func"]);
    if (j["event"] == "summary") lost = j["lost"].get<uint64_t>();
  }
  ASSERT_TRUE(lost) << out;
  EXPECT_EQ(*lost, 0u);
  EXPECT_EQ(created.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(parents.size(), 1u) << "one accepting goroutine";
  EXPECT_FALSE(parents.count(0));
  // The accepting goroutine is older than the attach: its first state change still says
  // which function it runs, read from its g.
  ASSERT_FALSE(parents.empty());
  EXPECT_FALSE(first_func[*parents.begin()].empty()) << "no start function for the acceptor";
  size_t ended = 0;
  for (uint64_t g : created) ended += exited.count(g);
  EXPECT_EQ(ended, created.size()) << "connection goroutines that never exited";
  expect_serves_after_detach();
}

INSTANTIATE_TEST_SUITE_P(Backends, AttachedServer, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
