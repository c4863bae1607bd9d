// Helpers for runtime tests that drive a real server on loopback: child processes on pipes,
// HTTP/1.1 requests on fresh connections, and Debian's stripped rclone serving a directory.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gotap::testing {

// A child process with its stdout and stderr on pipes.
struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;
};
Child spawn(const std::vector<std::string>& argv);

// Reads fd until `needle` shows up or the deadline passes; returns what was read.
std::string read_until(int fd, const std::string& needle, int timeout_ms);
std::string read_all(int fd);

// A free loopback port (bound and released; the server takes it right after), below the
// kernel's ephemeral range, where no connection's source port takes it meanwhile.
int free_port();

// One HTTP/1.1 GET on a connection of its own; the whole response, or nullopt.
std::optional<std::string> http_get(int port, const std::string& path);
// Reaps pid within timeout_ms; its wait status (-1 when it is no child of ours), or nullopt
// when it had not ended.
std::optional<int> reap_within(pid_t pid, int timeout_ms);
bool served_ok(const std::optional<std::string>& r, const std::string& body);

// The bytes of the program's executable mappings, from /proc/PID/mem, next to the same
// ranges of its file: equal when no int3 (gotap's or a uprobe's) is left in them.
struct TextCompare {
  size_t bytes = 0;
  size_t differing = 0;
  std::string first;  // the first difference, for failure messages
  // Bytes that are a `jmp rel32` (0xe9) in memory and not in the file: a trampoline
  // gotap's short-check jumps, among others.
  size_t jmp_opcodes = 0;
};
TextCompare compare_text(pid_t pid);

// The lines of /proc/PID/maps, for a before-and-after.
std::vector<std::string> maps_of(pid_t pid);

// How many executable mappings with no file `maps` has: where trampolines live.
size_t anonymous_code(const std::vector<std::string>& maps);

// A gotap started in the background, its stderr read until the banner.
struct Background {
  explicit Background(Child child) : c(child) {}
  Child c;
  std::string err;
  // Whether the "Tracing ..." banner came within `timeout_ms`.
  bool tracing(int timeout_ms = 60000);
  // Ends it with `sig`; its exit status (-1 when a signal ended it), and what it wrote.
  int end(int sig, std::string* out);
};

// The latency fixture (PATH) in spin mode, for the life of the object: ask(n) has it call
// main.work n times and waits for its "did n"; the destructor kills and reaps it.
class Spin {
 public:
  explicit Spin(const std::string& path);
  ~Spin();
  Spin(const Spin&) = delete;
  Spin& operator=(const Spin&) = delete;
  pid_t pid() const { return pid_; }
  bool ask(int n);
  // Closes its stdin: it says "done" and exits 0.
  bool ends_well();

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
};

// Debian's rclone (tests/tools/fetch-real-binaries.sh), or "" when it was not fetched.
std::string rclone_path();

// Debian's stripped rclone (`rclone serve http`) serving a fresh temporary directory on a
// free loopback port, for the life of the object: stop() (or the destructor) ends it with
// SIGTERM, reaps it and removes the directory.
//
//   if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
//   RcloneServer srv;
//   std::string err = srv.start("gotap-srv");
//   ASSERT_TRUE(err.empty()) << err;
//   http_get(srv.port(), "/page.txt");
class RcloneServer {
 public:
  // What the default directory holds: one file, page.txt.
  static constexpr const char* kPage = "/page.txt";
  static constexpr const char* kBody = "served by a stripped Go program\n";
  using Files = std::vector<std::pair<std::string, std::string>>;  // name, contents

  // Why no server can be started here ("" when one can): rclone was not fetched.
  static std::string unavailable_reason();

  RcloneServer() = default;
  RcloneServer(const RcloneServer&) = delete;
  RcloneServer& operator=(const RcloneServer&) = delete;
  ~RcloneServer() { stop(); }

  // Writes `files` into a fresh directory $TMPDIR/<tag>-<our pid>, serves it, and waits up to
  // ten seconds until the first file is served with its contents. "" when it serves, else
  // what went wrong (the server, if started, is stopped again by stop()).
  std::string start(const std::string& tag, const Files& files = {{"page.txt", kBody}});
  void stop();

  // Whether one GET of kPage, on a connection of its own, is answered with kBody.
  bool serves_page() const;

  // What the server wrote to stderr so far (up to half a second of it): a crash's report.
  std::string output() const;

  int port() const { return port_; }
  pid_t pid() const { return srv_.pid; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  Child srv_;
};

}  // namespace gotap::testing
