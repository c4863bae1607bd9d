#include "core/events/live_metrics.h"

#include <utility>

namespace gotap {

void LiveMetrics::begin(int pid, Reader read) {
  std::lock_guard<std::mutex> lock(mu_);
  last_.pid = pid;
  last_.ended = false;
  reader_ = std::move(read);
}

void LiveMetrics::end() {
  std::lock_guard<std::mutex> lock(mu_);
  read_locked(last_);
  reader_ = nullptr;
  last_.ended = true;
}

void LiveMetrics::read_locked(MetricsSnapshot& s) {
  if (!reader_) return;
  s.funcs.clear();
  s.lost = 0;
  reader_(s);
}

void LiveMetrics::observe(const Event& ev) {
  const auto kind = ev.find("event");
  if (kind == ev.end() || !kind->is_string()) return;
  const std::string& k = kind->get_ref<const std::string&>();
  if (k != "gstate" && k != "gcreate" && k != "gexit") return;
  const auto goid = ev.find("goid");
  if (goid == ev.end() || !goid->is_number_unsigned()) return;
  const uint64_t id = goid->get<uint64_t>();
  std::lock_guard<std::mutex> lock(mu_);
  last_.goroutines = true;
  if (k == "gexit") {
    gstate_.erase(id);
  } else if (k == "gstate") {
    const auto to = ev.find("to");
    if (to == ev.end() || !to->is_string()) return;
    if (*to == "dead")
      gstate_.erase(id);
    else
      gstate_[id] = to->get<std::string>();
  } else if (!gstate_.count(id)) {
    // A new goroutine is runnable until its first status change says otherwise.
    gstate_[id] = "runnable";
  }
}

MetricsSnapshot LiveMetrics::scrape() {
  return snapshot(true);
}

MetricsSnapshot LiveMetrics::read() {
  return snapshot(false);
}

MetricsSnapshot LiveMetrics::snapshot(bool scraped) {
  std::lock_guard<std::mutex> lock(mu_);
  read_locked(last_);
  if (last_.ended && scraped) ++final_scrapes_;
  MetricsSnapshot s = last_;
  s.gstates.clear();
  for (const auto& [goid, state] : gstate_) ++s.gstates[state];
  return s;
}

uint64_t LiveMetrics::final_scrapes() {
  std::lock_guard<std::mutex> lock(mu_);
  return final_scrapes_;
}

namespace {

class MetricsObserver : public EventSink {
 public:
  MetricsObserver(std::unique_ptr<EventSink> next, LiveMetrics& m)
      : next_(std::move(next)), m_(m) {}
  void emit(const Event& ev) override {
    m_.observe(ev);
    next_->emit(ev);
  }
  void flush() override { next_->flush(); }

 private:
  std::unique_ptr<EventSink> next_;
  LiveMetrics& m_;
};

}  // namespace

std::unique_ptr<EventSink> make_metrics_observer(std::unique_ptr<EventSink> next,
                                                 LiveMetrics& metrics) {
  return std::make_unique<MetricsObserver>(std::move(next), metrics);
}

}  // namespace gotap
