// The ptrace tracer's output, off the stopped thread's path (issue 22, goal 1): the events
// of a hit are staged while it is handled and handed over, with the hit's memory copy, once
// its thread is resumed; a second thread decodes what waited for the copy, writes the lines
// and flushes them on a timer. The tracer thread only takes stops.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "backends/ptrace/hit_reader.h"
#include "core/decode/value_decoder.h"
#include "core/events/events.h"
#include "core/events/typed_events.h"

namespace gotap::ptrace {

// One event of a hit, in the order the tracer emitted it. A CallEntry or CallReturn with
// `params` has its values decoded on the queue's thread from `regs` and `copy` alone
// (HitReader::copyable): never from live memory, which the resumed thread may be changing.
struct QueuedEvent {
  QueuedEvent() = default;
  template <class E>
  QueuedEvent(E e, const std::vector<ParamLoc>* p = nullptr, const RegState& rs = {})  // NOLINT
      : ev(std::move(e)), params(p), regs(rs) {}
  std::variant<Event, CallEntry, CallReturn> ev;
  const std::vector<ParamLoc>* params = nullptr;  // the entry's arguments, the return's results
  RegState regs{};
  std::vector<HitMemory::Region> copy;
};

class EventQueue {
 public:
  // `capacity`: events held before push() blocks (bounded memory; nothing is dropped).
  // `flush_ns`: how long a written event may wait for its flush (0: whenever the queue
  // runs dry); within the 100 ms a live trace allows (docs/cli.md).
  EventQueue(EventSink& out, TraceeMemory& live, const DecodeEnv& env, DecodeLimits lim,
             size_t capacity, uint64_t flush_ns);
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Hands over `items` in order and clears it; blocks while the queue is full.
  void push(std::vector<QueuedEvent>& items);
  // Writes and flushes everything queued and ends the thread: the sink is the caller's again.
  void stop();
  // The first exception of decoding or writing; the events after it are not written.
  std::optional<std::string> failure() const;
  // Set with failure(): polled, without a lock, by whoever must stop on it.
  const std::atomic<bool>& failed() const { return failed_; }
  // Reads of the copies that found nothing (HitMemory::misses), once stopped.
  uint64_t misses() const { return mem_.misses(); }

 private:
  void run();
  void write(QueuedEvent& q);
  void fail(const std::string& why);

  EventSink& out_;
  HitMemory mem_;  // never live: the copy of the event being decoded
  ValueDecoder dec_;
  const size_t capacity_;
  const uint64_t flush_ns_;
  const uint64_t batch_ns_;  // how long events gather before the thread takes them
  mutable std::mutex mu_;
  std::condition_variable not_empty_, not_full_;
  std::vector<QueuedEvent> q_;
  bool stopping_ = false;
  bool idle_ = false;  // waiting with nothing queued or unflushed: a push must wake it
  std::optional<std::string> failure_;
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

}  // namespace gotap::ptrace
