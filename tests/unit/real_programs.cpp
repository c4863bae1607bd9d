#include "tests/unit/real_programs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string debian_program(const std::string& name) {
  std::string p = "/usr/bin/" + name;
  return access(p.c_str(), X_OK) == 0 ? p : "";
}

TempDir::TempDir(const std::string& tag)
    : dir_(std::filesystem::temp_directory_path() /
           ("gotap-" + tag + "-" + std::to_string(getpid()))) {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// SIGTERM/SIGINT first, SIGKILL when that did not end it; returns the wait status.
static int end_process(pid_t pid, int sig, int grace_ms) {
  kill(pid, sig);
  if (auto st = reap_within(pid, grace_ms)) return *st;
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

std::string Service::start(const std::vector<std::string>& argv, const std::string& log_file) {
  stop();
  int log = open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) return "cannot create " + log_file;
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  close(log);
  if (pid < 0) return "cannot fork for " + argv[0];
  pid_ = pid;
  return "";
}

bool Service::alive() {
  if (pid_ <= 0) return false;
  int st = 0;
  return waitpid(pid_, &st, WNOHANG) == 0;
}

void Service::stop() {
  if (pid_ > 0) end_process(pid_, SIGTERM, 5000);
  pid_ = -1;
}

AttachedGotap::~AttachedGotap() {
  if (pid_ > 0) end_process(pid_, SIGINT, 30000);
  if (err_fd_ >= 0) close(err_fd_);
}

std::string AttachedGotap::attach(std::vector<std::string> args, pid_t pid,
                                  const std::string& out_file) {
  args.insert(args.begin(), gotap_binary());
  args.insert(args.end(), {"-o", out_file, "-p", std::to_string(pid)});
  Child tap = spawn(args);
  if (tap.pid <= 0) return "cannot start " + gotap_binary();
  close(tap.out);
  pid_ = tap.pid;
  err_fd_ = tap.err;
  err_ = read_until(err_fd_, "Tracing ", 60000);
  if (err_.find("Tracing ") == std::string::npos) return "gotap did not attach: " + err_;
  return "";
}

int AttachedGotap::detach(std::string* err) {
  if (pid_ <= 0) return -1;
  int st = end_process(pid_, SIGINT, 30000);
  pid_ = -1;
  err_ += read_all(err_fd_);
  close(err_fd_);
  err_fd_ = -1;
  if (err) *err = err_;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

bool wait_until(int timeout_ms, const std::function<bool()>& ready) {
  auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (ready()) return true;
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Counts counts_in(const std::string& jsonl) {
  Counts c;
  for (const json& e : events_in(jsonl)) {
    if (e["event"] == "count") c.by_func[e["func"].get<std::string>()] = e["count"].get<uint64_t>();
    if (e["event"] == "summary") c.summary = e;
  }
  return c;
}

json arg_value(const json& entry, const std::string& name) {
  for (const json& a : entry.value("args", json::array()))
    if (a.value("name", "") == name) return a.value("value", json());
  return json();
}

std::optional<std::string> traced_bytes(const json& v) {
  // A quoted form of the bytes (Go's %q, as a JSON string) holds them all.
  if (v.is_string()) return v.get<std::string>();
  // The value format of the values branch: {"len":N,"cap":C,"bytes":"<hex>"}, "truncated"
  // or "unreadable" when not all of them were read.
  if (v.is_object() && v.contains("bytes") && v["bytes"].is_string()) {
    if (v.value("truncated", false) || v.value("unreadable", false)) return std::nullopt;
    const std::string hex = v["bytes"].get<std::string>();
    if (hex.size() % 2 || !v.contains("len") || v["len"] != hex.size() / 2) return std::nullopt;
    std::string bytes;
    for (size_t i = 0; i < hex.size(); i += 2) {
      if (!isxdigit(static_cast<unsigned char>(hex[i])) ||
          !isxdigit(static_cast<unsigned char>(hex[i + 1])))
        return std::nullopt;
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return bytes;
  }
  // docs/json.md: a slice is {"len":N,"cap":C,"elems":[..]}, "truncated" when elements are
  // missing; a [N]byte array is the list of its elements.
  const json* elems = &v;
  if (v.is_object()) {
    if (v.value("truncated", false) || !v.contains("elems")) return std::nullopt;
    elems = &v["elems"];
    if (!v.contains("len") || v["len"] != elems->size()) return std::nullopt;
  }
  if (!elems->is_array()) return std::nullopt;
  std::string bytes;
  for (const json& b : *elems) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 255)
      return std::nullopt;
    bytes.push_back(static_cast<char>(b.get<int64_t>()));
  }
  return bytes;
}

bool get_ok(int port, const std::string& path, const std::string& needle) {
  auto r = http_get(port, path);
  return r && r->rfind("HTTP/1.1 200", 0) == 0 && r->find(needle) != std::string::npos;
}

std::string query_escape(const std::string& text) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : text) {
    if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

std::string Prometheus::unavailable_reason() {
  if (debian_program("prometheus").empty())
    return "Debian's prometheus is not installed (apt install prometheus)";
  return "";
}

std::string Prometheus::start() {
  write_text(dir_ / "prometheus.yml", "global:\n  scrape_interval: 1h\n");
  port_ = free_port();
  std::string err =
      srv_.start({debian_program("prometheus"), "--config.file=" + (dir_ / "prometheus.yml"),
                  "--storage.tsdb.path=" + (dir_ / "tsdb"),
                  "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
                 dir_ / "prometheus.log");
  if (!err.empty()) return err;
  if (!wait_until(30000, [&] { return get_ok(port_, "/-/ready", "Ready"); }))
    return "prometheus did not come up: " + read_file(dir_ / "prometheus.log");
  return "";
}

std::string Etcd::unavailable_reason() {
  if (debian_program("etcd").empty() || debian_program("etcdctl").empty())
    return "Debian's etcd is not installed (apt install etcd-server etcd-client)";
  return "";
}

std::string Etcd::start() {
  client_ = free_port();
  const std::string peer = "http://127.0.0.1:" + std::to_string(free_port());
  std::string err =
      srv_.start({debian_program("etcd"), "--name", "gotap", "--data-dir", dir_ / "data",
                  "--listen-client-urls", endpoint(), "--advertise-client-urls", endpoint(),
                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                  "--initial-cluster", "gotap=" + peer},
                 dir_ / "etcd.log");
  if (!err.empty()) return err;
  if (!wait_until(30000, [&] { return get_ok(client_, "/health", "\"health\":\"true\""); }))
    return "etcd did not come up: " + read_file(dir_ / "etcd.log");
  return "";
}

std::optional<std::string> Etcd::ctl(std::vector<std::string> args) const {
  args.insert(args.begin(), {debian_program("etcdctl"), "--endpoints", endpoint()});
  RunResult r = run_command(args, 30);
  if (r.exit_code != 0) return std::nullopt;
  return r.out;
}

static std::string caddy_path() {
  for (const auto& rb : real_binaries())
    if (rb.name == "caddy") return rb.path;
  return "";
}

std::string Caddy::unavailable_reason() {
  if (caddy_path().empty()) return "no caddy from Debian (tests/tools/fetch-real-binaries.sh)";
  return "";
}

std::string Caddy::start() {
  // `output stderr`: the site's logger is chosen by the request's Host, and a Host without
  // the port would log elsewhere; stderr is where every access line goes either way.
  return start_site(
      "\tlog {\n\t\toutput stderr\n\t\tformat json\n\t}\n"
      "\trespond /ok \"ok\" 200\n\trespond /tea \"tea\" 418\n"
      "\trespond /none 204\n\trespond 404\n",
      "/ok", "ok");
}

std::string Caddy::start_reverse_proxy(int upstream, const std::string& needle) {
  return start_site("\treverse_proxy 127.0.0.1:" + std::to_string(upstream) + "\n", "/", needle);
}

std::string Caddy::start_site(const std::string& site, const std::string& path,
                              const std::string& needle) {
  port_ = free_port();
  write_text(dir_ / "Caddyfile", "{\n\tadmin off\n\tauto_https off\n}\nhttp://127.0.0.1:" +
                                     std::to_string(port_) + " {\n" + site + "}\n");
  const std::string home = dir_.path().string();
  std::string err = srv_.start(
      {"/usr/bin/env", "HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_CONFIG_HOME=" + home,
       caddy_path(), "run", "--config", dir_ / "Caddyfile", "--adapter", "caddyfile"},
      dir_ / "caddy.log");
  if (!err.empty()) return err;
  if (!wait_until(30000, [&] { return get_ok(port_, path, needle); }))
    return "caddy did not come up: " + log();
  return "";
}

std::string Caddy::log() const {
  return read_file(dir_ / "caddy.log");
}

std::vector<std::pair<std::string, int>> Caddy::access_log() const {
  std::vector<std::pair<std::string, int>> logged;
  std::istringstream lines(log());
  for (std::string l; std::getline(lines, l);) {
    json j = json::parse(l, nullptr, false);
    if (j.is_object() && j.value("msg", "") == "handled request" && j.contains("status"))
      logged.emplace_back(j["request"].value("uri", ""), j["status"].get<int>());
  }
  return logged;
}

// A struct's fields by name, from either form docs/json.md may give a struct in.
static json fields_by_name(const json& v) {
  if (v.is_object() && v.contains("fields") && v["fields"].is_array()) {
    json named = json::object();
    for (const json& f : v["fields"])
      if (f.is_object() && f.contains("name"))
        named[f["name"].get<std::string>()] = f.value("value", json());
    return named;
  }
  return v;
}

json traced_field(const json& value, const std::string& name) {
  json f = fields_by_name(value);
  if (!f.is_object() || !f.contains(name)) return json();
  return f[name];
}

std::optional<int64_t> traced_unix_ns(const json& value) {
  constexpr int64_t kUnixToInternal = 62135596800;  // seconds from year 1 to 1970 (Go's time)
  constexpr int64_t kWallToInternal = 59453308800;  // seconds from year 1 to 1885
  if (value.is_string()) {  // Go's Time.String(): "2006-01-02 15:04:05.999999999 -0700 MST"
    const std::string s = value.get<std::string>();
    tm t{};
    int used = 0;
    if (sscanf(s.c_str(), "%d-%d-%d %d:%d:%d%n", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour,
               &t.tm_min, &t.tm_sec, &used) != 6)
      return std::nullopt;
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    int64_t ns = 0;
    size_t i = static_cast<size_t>(used);
    if (i < s.size() && s[i] == '.') {
      int64_t scale = 100000000;
      for (++i; i < s.size() && isdigit(static_cast<unsigned char>(s[i])); ++i, scale /= 10)
        ns += (s[i] - '0') * scale;
    }
    int hh = 0, mm = 0;
    char sign = '+';
    if (sscanf(s.c_str() + i, " %c%2d%2d", &sign, &hh, &mm) != 3) return std::nullopt;
    int64_t offset = (hh * 3600 + mm * 60) * (sign == '-' ? -1 : 1);
    return (static_cast<int64_t>(timegm(&t)) - offset) * 1000000000 + ns;
  }
  json f = fields_by_name(value);
  if (!f.is_object() || !f.contains("wall") || !f.contains("ext")) return std::nullopt;
  if (!f["wall"].is_number_integer() || !f["ext"].is_number_integer()) return std::nullopt;
  // time.Time: wall's top bit says whether it holds a monotonic reading; then its next 33
  // bits are the seconds since 1885 and ext the monotonic clock; else ext holds the
  // seconds since year 1. The low 30 bits of wall are the nanoseconds either way.
  const uint64_t wall = f["wall"].get<uint64_t>();
  const int64_t ext = f["ext"].get<int64_t>();
  const int64_t nsec = static_cast<int64_t>(wall & ((1u << 30) - 1));
  const int64_t sec =
      (wall >> 63) ? static_cast<int64_t>((wall << 1) >> 31) + kWallToInternal : ext;
  return (sec - kUnixToInternal) * 1000000000 + nsec;
}

std::optional<int64_t> traced_duration_ns(const json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  // {"duration":"1m30s","ns":90000000000}: the exact count, and Go's printing of it.
  if (value.is_object() && value.contains("ns") && value["ns"].is_number_integer())
    return value["ns"].get<int64_t>();
  if (!value.is_string()) return std::nullopt;
  // Go's Duration.String(): "1h2m3.5s", "1.5ms", "2µs", "0s".
  const std::string s = value.get<std::string>();
  const std::vector<std::pair<std::string, double>> units = {
      {"ns", 1},  {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"ms", 1e6},
      {"s", 1e9}, {"m", 6e10}, {"h", 3.6e12}};
  double total = 0;
  size_t i = 0;
  bool negative = !s.empty() && s[0] == '-';
  if (negative) ++i;
  while (i < s.size()) {
    size_t end = i;
    while (end < s.size() && (isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.')) ++end;
    if (end == i) return std::nullopt;
    double n = std::stod(s.substr(i, end - i));
    const std::pair<std::string, double>* unit = nullptr;
    for (const auto& u : units)  // the longest unit that matches ("ms" before "m")
      if (s.compare(end, u.first.size(), u.first) == 0 &&
          (!unit || u.first.size() > unit->first.size()))
        unit = &u;
    if (!unit) return std::nullopt;
    total += n * unit->second;
    i = end + unit->first.size();
  }
  return std::llround(negative ? -total : total);
}

void RealProgramTest::SetUp() {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
}

std::string RealProgramTest::attached(std::vector<std::string> args, pid_t pid, const TempDir& dir,
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

std::string etcd_key(int i) {
  return "gotap/key_" + std::to_string(i);
}
std::string etcd_value(int i) {
  return "value " + std::to_string(i * 7919);
}

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

}  // namespace gotap::testing
