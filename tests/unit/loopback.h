// Helpers for runtime tests that drive a real server on loopback: child processes on pipes,
// HTTP/1.1 requests on fresh connections, and Debian's stripped rclone serving a directory.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
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

// A free loopback port (bound and released; the server takes it right after).
int free_port();

// One HTTP/1.1 GET on a connection of its own; the whole response, or nullopt.
std::optional<std::string> http_get(int port, const std::string& path);
bool served_ok(const std::optional<std::string>& r, const std::string& body);

// Debian's rclone (tests/tools/fetch-real-binaries.sh), or "" when it was not fetched.
std::string rclone_path();

}  // namespace gotap::testing
