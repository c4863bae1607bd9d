#include "frontends/fault_injection.h"

#include <cstdlib>
#include <stdexcept>

namespace gotap::cli {

namespace {

class FailingSink : public EventSink {
 public:
  FailingSink(std::unique_ptr<EventSink> inner, unsigned long at)
      : inner_(std::move(inner)), at_(at) {}
  void emit(const Event& ev) override {
    count();
    inner_->emit(ev);
  }
  void emit_entry(const CallEntry& e) override {
    count();
    inner_->emit_entry(e);
  }
  void emit_return(const CallReturn& r) override {
    count();
    inner_->emit_return(r);
  }
  void emit_unfinished(const CallUnfinished& u) override {
    count();
    inner_->emit_unfinished(u);
  }
  void flush() override { inner_->flush(); }

 private:
  void count() {
    if (++seen_ == at_)
      throw std::runtime_error("injected output failure (GOTAP_TEST_FAIL_SINK_AT)");
  }
  std::unique_ptr<EventSink> inner_;
  unsigned long at_;
  unsigned long seen_ = 0;
};

}  // namespace

std::unique_ptr<EventSink> maybe_failing_sink(std::unique_ptr<EventSink> sink) {
  const char* e = std::getenv("GOTAP_TEST_FAIL_SINK_AT");
  if (!e) return sink;
  const unsigned long at = std::strtoul(e, nullptr, 10);
  if (at == 0) return sink;
  return std::make_unique<FailingSink>(std::move(sink), at);
}

}  // namespace gotap::cli
