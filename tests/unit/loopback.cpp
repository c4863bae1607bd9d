#include "tests/unit/loopback.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "core/sys/fd.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {

using Clock = std::chrono::steady_clock;

Child spawn(const std::vector<std::string>& argv) {
  sys::Pipe o = sys::make_pipe(), e = sys::make_pipe();
  if (!o.read || !e.read) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(o.write.get(), 1);
    dup2(e.write.get(), 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  if (pid < 0) return {};
  return {pid, o.read.release(), e.read.release()};
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

std::optional<int> reap_within(pid_t pid, int timeout_ms) {
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0) return -1;
    if (Clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string read_all(int fd) {
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) got.append(buf, n);
  return got;
}

// A free loopback port (bound and released; the server takes it right after). Below the
// kernel's ephemeral range (32768 and up): a port the kernel picked there could be taken as
// the source port of any connection, another test's client included, before the server
// bound it, and a test then spoke to whatever held it. Each test process starts at a place
// of its own (its pid), so that tests run in parallel rarely try the same port.
int free_port() {
  static int next = 20000 + static_cast<int>(getpid() * 37 % 12000);
  for (int tries = 0; tries < 12000; ++tries) {
    const int port = 20000 + (next++ - 20000) % 12000;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(s);
    if (ok) return port;
  }
  return 0;
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

Spin::Spin(const std::string& path) {
  sys::Pipe in = sys::make_pipe(), out = sys::make_pipe();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in.read.get(), 0);
    dup2(out.write.get(), 1);
    execl(path.c_str(), path.c_str(), "spin", nullptr);
    _exit(127);
  }
  in_ = in.write.release();
  out_ = out.read.release();
}

Spin::~Spin() {
  if (in_ >= 0) close(in_);
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_ >= 0) close(out_);
}

bool Spin::ask(int n) {
  const std::string line = std::to_string(n) + "\n";
  if (write(in_, line.data(), line.size()) != ssize_t(line.size())) return false;
  const std::string did = "did " + std::to_string(n) + "\n";
  return read_until(out_, did, 30000).find(did) != std::string::npos;
}

bool Spin::ends_well() {
  close(in_);
  in_ = -1;
  int st = 0;
  waitpid(pid_, &st, 0);
  pid_ = -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

std::string rclone_path() {
  for (const auto& rb : real_binaries())
    if (rb.name == "rclone") return rb.path;
  return "";
}

std::string RcloneServer::unavailable_reason() {
  if (rclone_path().empty()) return "no rclone from Debian (tests/tools/fetch-real-binaries.sh)";
  return "";
}

std::string RcloneServer::start(const std::string& tag, const Files& files) {
  stop();
  std::string rclone = rclone_path();
  if (rclone.empty()) return unavailable_reason();
  if (files.empty()) return "RcloneServer::start: no files to serve";
  dir_ = std::filesystem::temp_directory_path() / (tag + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir_);
  for (const auto& [name, contents] : files) std::ofstream(dir_ / name) << contents;
  port_ = free_port();
  srv_ = spawn({rclone, "serve", "http", dir_.string(), "--addr",
                "127.0.0.1:" + std::to_string(port_), "--config", "/dev/null"});
  if (srv_.pid <= 0) return "cannot start " + rclone;
  const std::string path = "/" + files.front().first, &body = files.front().second;
  for (int i = 0; i < 100; ++i) {
    if (served_ok(http_get(port_, path), body)) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "rclone serve http did not come up";
}

void RcloneServer::stop() {
  if (srv_.pid > 0) {
    kill(srv_.pid, SIGTERM);
    waitpid(srv_.pid, nullptr, 0);
    close(srv_.out);
    close(srv_.err);
    srv_ = Child{};
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

bool RcloneServer::serves_page() const {
  return served_ok(http_get(port_, kPage), kBody);
}

std::string RcloneServer::output() const {
  return srv_.err >= 0 ? read_until(srv_.err, "\n\n\n\n", 500) : "";
}

TextCompare compare_text(pid_t pid) {
  TextCompare out;
  const std::string exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe");
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::FILE* mem = std::fopen(("/proc/" + std::to_string(pid) + "/mem").c_str(), "rb");
  std::FILE* file = std::fopen(exe.c_str(), "rb");
  if (!mem || !file) {
    if (mem) std::fclose(mem);
    if (file) std::fclose(file);
    return out;
  }
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream ls(line);
    std::string range, perms, off, dev, inode, path;
    ls >> range >> perms >> off >> dev >> inode >> path;
    if (perms.size() < 3 || perms[2] != 'x' || path != exe) continue;
    const uint64_t lo = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    const uint64_t hi = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    const uint64_t foff = std::stoull(off, nullptr, 16);
    std::vector<unsigned char> a(hi - lo), b(hi - lo);
    // The file may end before the mapping's last page.
    std::fseek(file, long(foff), SEEK_SET);
    const size_t nfile = std::fread(b.data(), 1, b.size(), file);
    std::fseek(mem, long(lo), SEEK_SET);
    const size_t nmem = std::fread(a.data(), 1, nfile, mem);
    out.bytes += nmem;
    for (size_t i = 0; i < std::min(nmem, nfile); ++i) {
      if (a[i] == b[i]) continue;
      out.jmp_opcodes += a[i] == 0xe9;
      if (out.differing++ == 0) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%#llx: %#x in memory, %#x in the file",
                      (unsigned long long)(lo + i), a[i], b[i]);
        out.first = buf;
      }
    }
    if (nmem != nfile) out.first += " (short read of memory)";
  }
  std::fclose(mem);
  std::fclose(file);
  return out;
}

std::vector<std::string> maps_of(pid_t pid) {
  std::vector<std::string> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

size_t anonymous_code(const std::vector<std::string>& maps) {
  static const std::regex re(R"(^\S+ r-xp \S+ 00:00 0\s*$)");
  size_t n = 0;
  for (const auto& m : maps) n += std::regex_match(m, re);
  return n;
}

bool Background::tracing(int timeout_ms) {
  err += read_until(c.err, "Tracing ", timeout_ms);
  return err.find("Tracing ") != std::string::npos;
}

int Background::end(int sig, std::string* out) {
  kill(c.pid, sig);
  std::string o = read_all(c.out);
  err += read_all(c.err);
  int st = 0;
  waitpid(c.pid, &st, 0);
  close(c.out);
  close(c.err);
  if (out) *out = o;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace gotap::testing
