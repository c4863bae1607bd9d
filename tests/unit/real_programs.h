// Helpers for the real-program tests (test_runtime_real_programs.cpp): Debian's stripped Go
// programs started on loopback with their output in a log file, gotap attached to them by
// pid or launching them, and the JSON Lines gotap prints, read back.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gotap::testing {

// /usr/bin/NAME when that is an executable file, else "".
std::string debian_program(const std::string& name);

// A fresh directory $TMPDIR/gotap-<tag>-<our pid>, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return dir_; }
  std::string operator/(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
};

void write_text(const std::string& path, const std::string& text);

// A long-running program (a server) whose stdout and stderr go to a log file: a pipe that
// nobody reads would fill with its logs and stop it. stop() (or the destructor) ends it with
// SIGTERM, then SIGKILL after five seconds, and reaps it.
class Service {
 public:
  Service() = default;
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;
  ~Service() { stop(); }
  // "" when started, else why not.
  std::string start(const std::vector<std::string>& argv, const std::string& log_file);
  // Whether it still runs (not exited, not a zombie we have not reaped).
  bool alive();
  void stop();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// `gotap ARGS -o OUT -p PID`, attached for the length of a test's requests.
class AttachedGotap {
 public:
  AttachedGotap() = default;
  AttachedGotap(const AttachedGotap&) = delete;
  AttachedGotap& operator=(const AttachedGotap&) = delete;
  ~AttachedGotap();
  // Starts gotap and waits (up to 60 s) until it says it traces. "" then, else why not.
  std::string attach(std::vector<std::string> args, pid_t pid, const std::string& out_file);
  // Ends it with SIGINT (bounded: SIGKILL after 30 s). Its exit code (-1 for a signal) and
  // its stderr in `err`.
  int detach(std::string* err);

 private:
  pid_t pid_ = -1;
  int err_fd_ = -1;
  std::string err_;
};

// Waits until `ready()` holds, polling every 200 ms up to timeout_ms.
bool wait_until(int timeout_ms, const std::function<bool()>& ready);

// One line of JSON per event as gotap prints them; count events per function (a function
// never called is left out by gotap, so it reads as 0 here), and the summary.
struct Counts {
  std::map<std::string, uint64_t> by_func;
  std::optional<nlohmann::json> summary;
  uint64_t of(const std::string& func) const {
    auto it = by_func.find(func);
    return it == by_func.end() ? 0 : it->second;
  }
};
Counts counts_in(const std::string& jsonl);

// The argument `name` of a trace's entry event, or null.
nlohmann::json arg_value(const nlohmann::json& entry, const std::string& name);

// The bytes of a traced `[]byte` (or `[N]byte`) value, in the representation docs/json.md
// documents (a list of numbers), in the one of the value-format change under way
// ({"len":N,"bytes":"<hex>"}) or as a JSON string; nullopt when the value does not hold
// all of them (not captured, truncated). The one place that knows how bytes look in
// gotap's JSON: adapt it when that changes.
std::optional<std::string> traced_bytes(const nlohmann::json& value);

// One GET on a connection of its own, answered 200 with `needle` in the body.
bool get_ok(int port, const std::string& path, const std::string& needle);
// `text` as a URL query value (RFC 3986 unreserved characters kept, the rest %XX).
std::string query_escape(const std::string& text);

// Debian's prometheus on a free loopback port with a fresh TSDB and no scrape targets, so
// that only a test's requests reach its HTTP server.
class Prometheus {
 public:
  static std::string unavailable_reason();
  explicit Prometheus(const TempDir& dir) : dir_(dir) {}
  // "" once it answers /-/ready, else why not (up to 30 s).
  std::string start();
  int port() const { return port_; }
  Service& service() { return srv_; }

 private:
  const TempDir& dir_;
  int port_ = 0;
  Service srv_;
};

// Debian's etcd on free loopback ports with a fresh data directory; etcdctl (API v3) as the
// client.
class Etcd {
 public:
  static std::string unavailable_reason();
  explicit Etcd(const TempDir& dir) : dir_(dir) {}
  // "" once /health says it is healthy, else why not (up to 30 s).
  std::string start();
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_); }
  // etcdctl ARGS against this etcd (bounded); its stdout, or nullopt when it failed.
  std::optional<std::string> ctl(std::vector<std::string> args) const;
  Service& service() { return srv_; }

 private:
  const TempDir& dir_;
  int client_ = 0;
  Service srv_;
};

// Debian's caddy (tests/tools/fetch-real-binaries.sh) on a free loopback port, answering
// /ok 200 "ok", /tea 418, /none 204 and anything else 404, with its JSON access log in its
// log file (start()), or a reverse proxy (start_reverse_proxy()); its state ($HOME, $XDG_*)
// in the temporary directory.
class Caddy {
 public:
  static std::string unavailable_reason();
  explicit Caddy(const TempDir& dir) : dir_(dir) {}
  // "" once /ok is answered, else why not (up to 30 s).
  std::string start();
  // Instead: a reverse proxy of every request to 127.0.0.1:UPSTREAM, with no access log; ""
  // once / is answered 200 with `needle` in the body, else why not (up to 30 s).
  std::string start_reverse_proxy(int upstream, const std::string& needle);
  int port() const { return port_; }
  Service& service() { return srv_; }
  // The requests of the access log so far, in order: URI and status answered.
  std::vector<std::pair<std::string, int>> access_log() const;
  std::string log() const;

 private:
  // Caddy serving `site` (the directives of one site block) on a free loopback port, ""
  // once `path` is answered 200 with `needle` in the body.
  std::string start_site(const std::string& site, const std::string& path,
                         const std::string& needle);
  const TempDir& dir_;
  int port_ = 0;
  Service srv_;
};

// The field `name` of a traced struct value, in either form docs/json.md may give a struct
// in ({"Name":..} or {"fields":[{"name":"Name","value":..}]}); null when it has none.
nlohmann::json traced_field(const nlohmann::json& value, const std::string& name);

// A traced time.Time as nanoseconds since the Unix epoch, and a time.Duration in
// nanoseconds; nullopt when the value is not whole. Like traced_bytes, the one place that
// knows how these look: today time.Time is its struct ({"wall":..,"ext":..,"loc":..}, or
// the same fields as {"fields":[{"name":..,"value":..}]}) and a Duration its int64 (or
// {"duration":"1m30s","ns":N}); Go's own printing ("2023-11-14 22:13:20.5 +0000 UTC",
// "1m30s") is accepted too.
std::optional<int64_t> traced_unix_ns(const nlohmann::json& value);
std::optional<int64_t> traced_duration_ns(const nlohmann::json& value);

// The real-program tests, once per backend (the parameter): they need root, and a built
// gotap.
class RealProgramTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  const std::string& backend() const { return GetParam(); }
  // `gotap ARGS... --backend B --json -p PID` around `drive()`; its JSON Lines output
  // afterwards. gotap must end with 0 once stopped with SIGINT.
  std::string attached(std::vector<std::string> args, pid_t pid, const TempDir& dir,
                       const std::function<void()>& drive);
};

// The keys and values the etcd tests put: "gotap/key_<i>", "value <i*7919>".
std::string etcd_key(int i);
std::string etcd_value(int i);

// A hugo site under DIR/site of `pages` markdown pages under content/posts (page i's body
// is page_body(i)), with minimal layouts and only the page kinds a page needs (no
// taxonomies, feeds, sitemap, robots.txt or 404 page).
std::string page_body(int i);
void write_site(const TempDir& dir, int pages);

}  // namespace gotap::testing
