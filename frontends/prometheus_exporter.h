// --prometheus ADDR: serves /metrics in the Prometheus exposition format while a trace runs,
// through prometheus-cpp's Exposer (its own HTTP threads). Each scrape reads the backend's
// counters afresh (LiveMetrics), so gotap keeps no history and its memory stays flat however
// long it runs.
#pragma once

#include <memory>
#include <string>

#include "core/events/live_metrics.h"
#include "core/model/result.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace gotap::cli {

// ADDR as civetweb takes it: "127.0.0.1:9464"; ":9464" and "localhost:9464" mean
// 127.0.0.1:9464, "0.0.0.0:9464" every IPv4 address. "[::1]:9464" only when civetweb was
// built with IPv6 (Debian's is not). Bad input when it is none of these.
Result<std::string> parse_prometheus_address(const std::string& addr);

class PrometheusExporter {
 public:
  // Listens on `addr` (bad input, naming it, when it cannot) and serves `metrics`. Every
  // series carries binary=`binary` and the traced pid; `goroutines`: gotap_goroutines is
  // served (zero for each state until goroutine events arrive).
  static Result<std::unique_ptr<PrometheusExporter>> start(const std::string& addr,
                                                           LiveMetrics& metrics,
                                                           const std::string& binary,
                                                           bool goroutines);
  ~PrometheusExporter();

  // "127.0.0.1:9464": where it listens (the port the kernel chose, for port 0).
  const std::string& where() const { return where_; }

  // After the trace: keeps serving the final values until one scrape has read them,
  // `seconds` have passed, or a (new) SIGINT/SIGTERM arrives.
  void linger(double seconds);

 private:
  PrometheusExporter() = default;
  std::shared_ptr<prometheus::Collectable> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  LiveMetrics* metrics_ = nullptr;
  std::string where_;
};

}  // namespace gotap::cli
