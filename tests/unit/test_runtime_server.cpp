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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// rclone serving a directory on a free loopback port (RcloneServer), for the length of a test.
class AttachedServer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    std::string err = srv_.start("gotap-srv");
    ASSERT_TRUE(err.empty()) << err;
  }
  void TearDown() override { srv_.stop(); }

  // Attaches `gotap ARGS -p PID`, serves kRequests requests from four clients at once, each
  // on a fresh connection, then stops gotap with SIGINT; returns its output. That goes to a
  // file: a full pipe nobody reads would stop gotap, and with ptrace the server with it.
  std::string trace_under_load(std::vector<std::string> args) {
    const std::string out_file = (srv_.dir() / "gotap.out").string();
    args.insert(args.begin(), gotap_binary());
    args.insert(args.end(), {"-o", out_file, "-p", std::to_string(srv_.pid())});
    Child tap = spawn(args);
    EXPECT_GT(tap.pid, 0);
    std::string err = read_until(tap.err, "Tracing ", 60000);
    EXPECT_NE(err.find("Tracing "), std::string::npos) << err;
    std::atomic<int> ok_traced{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c)
      clients.emplace_back([&] {
        for (int i = 0; i < kRequests / kClients; ++i) ok_traced += srv_.serves_page();
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
    for (int i = 0; i < 50; ++i) ok += srv_.serves_page();
    EXPECT_EQ(ok, 50);
    EXPECT_EQ(kill(srv_.pid(), 0), 0) << "the server died";
  }

  static constexpr int kClients = 4, kRequests = 400;
  RcloneServer srv_;
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

// A record of an attached trace names the file the process runs, not /proc/PID/exe (which
// means nothing once the process is gone), and the files gotap writes hold the program's
// memory: they are the owner's alone, as perf.data is.
TEST_P(AttachedServer, RecordNamesTheBinaryAndFilesArePrivate) {
  const std::string fn = "net/http.(*conn).serve";
  const std::string rec = (srv_.dir() / "trace.rec").string();
  std::string out =
      trace_under_load({"count", "--backend", GetParam(), "--json", "--record", rec, fn});
  std::istringstream in(read_file(rec));
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  json header = json::parse(first, nullptr, false);
  ASSERT_TRUE(header.is_object()) << first;
  char exe[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(srv_.pid()) + "/exe").c_str(), exe, sizeof exe);
  ASSERT_GT(n, 0);
  EXPECT_EQ(header.dump().find("/proc/"), std::string::npos) << header;
  EXPECT_NE(header.dump().find(std::string(exe, static_cast<size_t>(n))), std::string::npos)
      << header;
  for (const std::string& f : {rec, (srv_.dir() / "gotap.out").string()}) {
    struct stat st {};
    ASSERT_EQ(stat(f.c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  EXPECT_NE(out.find("\"count\":" + std::to_string(kRequests)), std::string::npos) << out;
}

// graph's ROOT may be a pointer-receiver method: `(*` in a name is a receiver, not a glob.
TEST_P(AttachedServer, GraphTakesAPointerReceiverRoot) {
  const std::string root = "net/http.(*conn).serve";
  std::string out =
      trace_under_load({"graph", "--backend", GetParam(), root, "net/http.(*conn).readRequest"});
  size_t roots = 0, reads = 0;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    roots += l.find(root + "() {") != std::string::npos;
    reads += l.find("net/http.(*conn).readRequest(") != std::string::npos;
  }
  EXPECT_EQ(roots, static_cast<size_t>(kRequests)) << out.substr(0, 2000);
  EXPECT_GE(reads, static_cast<size_t>(kRequests)) << out.substr(0, 2000);
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
