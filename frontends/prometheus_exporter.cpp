#include "frontends/prometheus_exporter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <civetweb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include "core/backend.h"

namespace gotap::cli {

namespace {

// mg_check_feature()'s bit for IPv6 listening sockets (civetweb.h documents the bits).
constexpr unsigned kCivetIpv6 = 8;

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// The histogram's bounds are the upper ends of `latency`'s log2 buckets, [2^(k-1), 2^k) ns,
// from 2 ns to 2^40 ns (about 18 minutes); longer calls land in +Inf only. Powers of two are
// also bounds of the fine buckets both backends keep, so each cumulative count is exact.
constexpr int kMaxLog2Bound = 40;

// The goroutine states a Go program spends its time in: always served, so a dashboard has a
// series for each from the first scrape.
constexpr const char* kCommonStates[] = {"running", "runnable", "waiting", "syscall"};

// Any of its counters moved: calls, or (read a moment apart from them) timed calls, failed
// or rate-limited ones.
bool called(const FuncMetrics& f) {
  return f.calls > 0 || f.latency.count > 0 || !f.latency.fine.empty() ||
         f.failed.value_or(0) > 0 || f.rate_limited.value_or(0) > 0;
}

class Collector : public prometheus::Collectable {
 public:
  Collector(LiveMetrics& m, std::string binary, bool goroutines)
      : m_(m), binary_(std::move(binary)), goroutines_(goroutines) {}

  std::vector<MetricFamily> Collect() const override {
    const MetricsSnapshot s = m_.scrape();
    const std::vector<ClientMetric::Label> base = {{"binary", binary_},
                                                   {"pid", std::to_string(s.pid)}};
    auto metric = [&](std::vector<ClientMetric::Label> extra = {}) {
      ClientMetric c;
      c.label = base;
      c.label.insert(c.label.end(), extra.begin(), extra.end());
      return c;
    };

    MetricFamily calls{
        "gotap_calls_total", "Calls of each traced function.", MetricType::Counter, {}};
    MetricFamily durations{"gotap_call_duration_seconds",
                           "How long calls took (latency and trace; bounds as in gotap latency).",
                           MetricType::Histogram,
                           {}};
    MetricFamily errors{"gotap_call_errors_total",
                        "Calls that returned a non-nil error (functions with an error result).",
                        MetricType::Counter,
                        {}};
    MetricFamily limited{"gotap_rate_limited_total",
                         "Calls --rate left out of the events (not lost: never sent).",
                         MetricType::Counter,
                         {}};
    for (const FuncMetrics& f : s.funcs) {
      // A function's series appear once it was called, as client libraries' labelled series
      // do: a whole binary's 46,129 functions made a scrape of 2 million lines, 4 to 7 s.
      if (!called(f)) continue;
      ClientMetric c = metric({{"func", f.func}});
      c.counter.value = static_cast<double>(f.calls);
      calls.metric.push_back(std::move(c));
      if (f.failed) {
        ClientMetric e = metric({{"func", f.func}});
        e.counter.value = static_cast<double>(*f.failed);
        errors.metric.push_back(std::move(e));
      }
      if (f.rate_limited) {
        ClientMetric r = metric({{"func", f.func}});
        r.counter.value = static_cast<double>(*f.rate_limited);
        limited.metric.push_back(std::move(r));
      }
      if (!f.timed) continue;
      ClientMetric h = metric({{"func", f.func}});
      // Counted from the buckets, not the separate total, so that _count always equals the
      // +Inf bucket even when a scrape lands between the kernel's two updates.
      uint64_t cumulative = 0;
      uint32_t b = 0;
      for (int k = 1; k <= kMaxLog2Bound; ++k) {
        const uint64_t bound = uint64_t{1} << k;
        for (; b < f.latency.fine.size() && latency_bucket_range(b).hi <= bound; ++b)
          cumulative += f.latency.fine[b];
        h.histogram.bucket.push_back({cumulative, static_cast<double>(bound) / 1e9});
      }
      for (; b < f.latency.fine.size(); ++b) cumulative += f.latency.fine[b];
      h.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
      h.histogram.sample_count = cumulative;
      h.histogram.sample_sum = static_cast<double>(f.latency.sum_ns) / 1e9;
      durations.metric.push_back(std::move(h));
    }

    // --why: each series once a call with that part (and wait reason) has returned.
    MetricFamily why{"gotap_call_seconds_total",
                     "Where traced calls' time went (--why): part is running, preempted, "
                     "runnable, syscall or waiting; reason is Go's wait reason for waiting.",
                     MetricType::Counter,
                     {}};
    for (const auto& [key, ns] : s.why_ns) {
      const auto& [func, part, reason] = key;
      ClientMetric c = metric({{"func", func}, {"part", part}, {"reason", reason}});
      c.counter.value = static_cast<double>(ns) / 1e9;
      why.metric.push_back(std::move(c));
    }

    std::vector<MetricFamily> out;
    out.push_back(std::move(calls));
    if (!durations.metric.empty()) out.push_back(std::move(durations));
    if (!why.metric.empty()) out.push_back(std::move(why));
    if (!errors.metric.empty()) out.push_back(std::move(errors));
    if (!limited.metric.empty()) out.push_back(std::move(limited));
    if (s.detached_functions) {
      MetricFamily d{"gotap_detached_functions_total",
                     "Functions --max-overhead detached: their probes cost over the budget.",
                     MetricType::Counter,
                     {}};
      ClientMetric c = metric({});
      c.counter.value = static_cast<double>(*s.detached_functions);
      d.metric.push_back(std::move(c));
      out.push_back(std::move(d));
    }
    if (goroutines_) {
      MetricFamily g{"gotap_goroutines",
                     "Goroutines in each state, of those seen since the trace began.",
                     MetricType::Gauge,
                     {}};
      std::map<std::string, uint64_t> states = s.gstates;
      for (const char* st : kCommonStates) states.emplace(st, 0);
      for (const auto& [state, n] : states) {
        ClientMetric c = metric({{"state", state}});
        c.gauge.value = static_cast<double>(n);
        g.metric.push_back(std::move(c));
      }
      out.push_back(std::move(g));
    }
    MetricFamily lost{"gotap_lost_events_total",
                      "Events dropped before they reached gotap's output.",
                      MetricType::Counter,
                      {}};
    ClientMetric l = metric();
    l.counter.value = static_cast<double>(s.lost);
    lost.metric.push_back(std::move(l));
    out.push_back(std::move(lost));
    return out;
  }

 private:
  LiveMetrics& m_;
  std::string binary_;
  bool goroutines_;
};

// civetweb serves a connection per worker thread, from its accept to its close: a client
// that connects and sends nothing held the only worker for civetweb's default 30 s, and 223
// such connections held every scrape for far longer than any scrape timeout. Now a worker
// waits at most kRequestTimeoutMs for a request, and there are kWorkers of them: each idle
// connection costs a worker kRequestTimeoutMs at most, and civetweb holds at most kWorkers +
// kQueued connections at once (more wait in the kernel's listen backlog). 250 idle connections
// delay a scrape by about 250 / kWorkers * kRequestTimeoutMs (test_runtime_prometheus.cpp).
constexpr int kWorkers = 48;
constexpr int kQueued = 32;
constexpr int kRequestTimeoutMs = 200;

std::vector<std::string> civet_options(const std::string& listening) {
  return {"listening_ports",    listening,
          "num_threads",        std::to_string(kWorkers),
          "connection_queue",   std::to_string(kQueued),
          "request_timeout_ms", std::to_string(kRequestTimeoutMs),
          "enable_keep_alive",  "no"};
}

bool parse_port(const std::string& text, int* port) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *port = std::stoi(text);
  return *port <= 65535;
}

// Why `civet` cannot be listened on, found by trying the same bind (civetweb only says that
// it failed): "Address already in use", "Cannot assign requested address", ...; "" when
// the bind works.
std::string bind_failure(const std::string& civet) {
  std::string host, port = civet;  // "PORT": every IPv4 address, as civetweb takes it
  if (civet[0] == '[') {
    size_t close = civet.find("]:");
    host = civet.substr(1, close - 1);
    port = civet.substr(close + 2);
  } else if (size_t colon = civet.rfind(':'); colon != std::string::npos) {
    host = civet.substr(0, colon);
    port = civet.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* ai = nullptr;
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &ai))
    return gai_strerror(rc);
  std::string why;
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = strerror(errno);
  } else {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) why = strerror(errno);
    close(fd);
  }
  freeaddrinfo(ai);
  return why;
}

}  // namespace

Result<std::string> parse_prometheus_address(const std::string& addr) {
  auto bad = [&] {
    return make_error(
        "bad --prometheus address '{}' (want HOST:PORT with an IPv4 address, "
        "localhost:PORT or :PORT)",
        addr);
  };
  int port = 0;
  if (!addr.empty() && addr[0] == '[') {
    size_t close = addr.find("]:");
    if (close == std::string::npos) return bad();
    const std::string host = addr.substr(1, close - 1);
    in6_addr a6{};
    if (inet_pton(AF_INET6, host.c_str(), &a6) != 1 || !parse_port(addr.substr(close + 2), &port))
      return bad();
    // Debian's civetweb is built without IPv6: it would accept the address and then fail to
    // start with no reason given.
    if (!mg_check_feature(kCivetIpv6))
      return make_error(
          "--prometheus {}: the HTTP server gotap is built with (civetweb) has no IPv6 support; "
          "use an IPv4 address such as 127.0.0.1:{} or :{}",
          addr, port, port);
    return "[" + host + "]:" + std::to_string(port);
  }
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos || !parse_port(addr.substr(colon + 1), &port)) return bad();
  std::string host = addr.substr(0, colon);
  // Loopback unless a host is given: the series name the traced program's functions, and
  // nothing is served to the network unless asked for (0.0.0.0:PORT).
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  in_addr a4{};
  if (inet_pton(AF_INET, host.c_str(), &a4) != 1) return bad();
  return host + ":" + std::to_string(port);
}

Result<std::unique_ptr<PrometheusExporter>> PrometheusExporter::start(const std::string& addr,
                                                                      LiveMetrics& metrics,
                                                                      const std::string& binary,
                                                                      bool goroutines) {
  auto civet = parse_prometheus_address(addr);
  if (!civet) return civet.error();
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter());
  e->metrics_ = &metrics;
  e->collector_ = std::make_shared<Collector>(metrics, binary, goroutines);

  // The HTTP threads start with every signal blocked: SIGINT, SIGTERM and the ptrace
  // backend's wake-up signal must reach the tracing thread, whose blocking waits return
  // EINTR on them. civetweb also sets SIGPIPE to SIG_IGN, which a launched program would
  // inherit; the old disposition goes back.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  struct sigaction old_pipe {};
  sigaction(SIGPIPE, nullptr, &old_pipe);
  std::string failure;
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(civet_options(*civet));
  } catch (const std::exception& ex) {
    failure = ex.what();
  }
  sigaction(SIGPIPE, &old_pipe, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!e->exposer_) {
    const std::string why = bind_failure(*civet);
    return make_error("cannot serve metrics on {}: {}", addr, why.empty() ? failure : why);
  }
  e->exposer_->RegisterCollectable(e->collector_);

  const std::string host = civet->substr(0, civet->rfind(':'));
  auto ports = e->exposer_->GetListeningPorts();
  e->where_ = host + ":" + (ports.empty() ? std::string("?") : std::to_string(ports[0]));
  return e;
}

PrometheusExporter::~PrometheusExporter() {
  // Stops civetweb and joins its threads; nothing of it outlives gotap's main().
  exposer_.reset();
}

void PrometheusExporter::linger(double seconds) {
  using Clock = std::chrono::steady_clock;
  if (seconds <= 0) return;
  stop_requested().store(false);
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (!stop_requested().load() && Clock::now() < until && metrics_->final_scrapes() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The response to that scrape is still being written: let it go out.
  if (metrics_->final_scrapes() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

}  // namespace gotap::cli
