#include "backends/ptrace/event_queue.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace gotap::ptrace {

EventQueue::EventQueue(EventSink& out, TraceeMemory& live, const DecodeEnv& env, DecodeLimits lim,
                       size_t capacity, uint64_t flush_ns)
    : out_(out),
      mem_(live),
      dec_(mem_, env, lim),
      capacity_(capacity ? capacity : 1),
      flush_ns_(flush_ns),
      batch_ns_(std::min<uint64_t>(flush_ns, 1'000'000)) {
  mem_.set_live(false);
  thread_ = std::thread([this] {
    // The stop signals go to the tracer's threads, whose waits they must interrupt; here
    // they would only cut a write short.
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    run();
  });
}

EventQueue::~EventQueue() {
  stop();
}

void EventQueue::push(std::vector<QueuedEvent>& items) {
  if (items.empty()) return;
  bool wake = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Full: the tracer waits (and the threads it holds with it) rather than lose events.
    not_full_.wait(lock, [&] { return q_.empty() || q_.size() + items.size() <= capacity_; });
    for (auto& q : items) q_.push_back(std::move(q));
    // The thread wakes on its own every batch_ns_ while events come: a wake-up per event
    // would cost the tracer a system call per hit.
    wake = idle_ || batch_ns_ == 0 || q_.size() >= capacity_ / 2;
  }
  items.clear();
  if (wake) not_empty_.notify_one();
}

void EventQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  not_empty_.notify_one();
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> EventQueue::failure() const {
  if (!failed_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void EventQueue::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_) failure_ = why;
  failed_.store(true);
}

void EventQueue::write(QueuedEvent& q) {
  if (q.params) {
    mem_.adopt(std::move(q.copy));
    auto decode = [&](std::vector<Param>& into) {
      EventBudget one(dec_);
      for (const auto& p : *q.params) {
        Event j = dec_.decode_param(p, q.regs);
        into.push_back({p.name, p.type_name, std::move(j["value"])});
      }
    };
    if (auto* e = std::get_if<CallEntry>(&q.ev)) decode(e->args);
    if (auto* r = std::get_if<CallReturn>(&q.ev)) decode(r->results);
  }
  if (auto* e = std::get_if<CallEntry>(&q.ev))
    out_.emit_entry(*e);
  else if (auto* r = std::get_if<CallReturn>(&q.ev))
    out_.emit_return(*r);
  else
    out_.emit(std::get<Event>(q.ev));
}

void EventQueue::run() {
  using clock = std::chrono::steady_clock;
  std::vector<QueuedEvent> batch;
  bool dirty = false;  // written since the last flush
  clock::time_point flush_at{};
  bool failed = false;
  for (;;) {
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (q_.empty() && !dirty && !stopping_) {
        idle_ = true;
        not_empty_.wait(lock, [&] { return !q_.empty() || stopping_; });
        idle_ = false;
      }
      // Lets events gather for a batch, but not past the pending flush's time.
      if (batch_ns_ && !stopping_) {
        auto until = clock::now() + std::chrono::nanoseconds(batch_ns_);
        if (dirty) until = std::min(until, flush_at);
        not_empty_.wait_until(lock, until, [&] { return stopping_ || q_.size() >= capacity_ / 2; });
      }
      batch.swap(q_);
      last = stopping_ && batch.empty();
    }
    not_full_.notify_one();
    for (auto& q : batch) {
      if (failed) break;
      try {
        write(q);
        if (!dirty) flush_at = clock::now() + std::chrono::nanoseconds(flush_ns_);
        dirty = true;
      } catch (const std::exception& e) {
        failed = true;
        fail(e.what());
      } catch (...) {
        failed = true;
        fail("unknown exception");
      }
    }
    batch.clear();
    // The first event written since the last flush waits at most flush_ns_ for it.
    if (dirty && (last || flush_ns_ == 0 || clock::now() >= flush_at)) {
      try {
        out_.flush();
      } catch (const std::exception& e) {
        fail(e.what());
        failed = true;
      }
      dirty = false;
    }
    if (last) return;
  }
}

}  // namespace gotap::ptrace
