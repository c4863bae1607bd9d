// A reader that goes away (`gotap trace ... | head`, a closed FIFO given to -o) ends a trace
// the way Ctrl-C does (docs/cli.md): probes removed, the summary on stderr, exit status 0.
// Without this, SIGPIPE would kill gotap with its probes still in the traced program.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "core/events/events.h"

namespace gotap::cli {

// Catches SIGPIPE (a handler, not SIG_IGN: a launched program must not inherit the change).
void catch_sigpipe();

// Wraps the sink that writes to `out`. A failed write, SIGPIPE, or (for pipes and sockets)
// the reader's end closing while nothing is written requests the stop; from then on events
// are dropped, and (the reader gone) the summary goes to stderr as text. A write that fails
// otherwise (a full disk) is kept in write_error() for the front end to report.
class ReaderGuard : public EventSink {
 public:
  ReaderGuard(std::unique_ptr<EventSink> inner, std::FILE* out);
  ~ReaderGuard() override;
  void emit(const Event& ev) override;
  void emit_entry(const CallEntry& e) override;
  void emit_return(const CallReturn& r) override;
  void emit_unfinished(const CallUnfinished& u) override;
  void flush() override;
  bool gone() const { return gone_.load(); }
  // A write that failed for another reason than the reader leaving (ENOSPC, EIO, EFBIG):
  // its errno, or 0. The trace stops as for a reader gone, but it is a failure (exit 1).
  int write_error() const { return write_error_.load(); }

 private:
  void mark_gone();
  // After a failed write: the reader left (EPIPE, SIGPIPE) or the write failed.
  void on_write_failed(int err);
  void retry_interrupted();
  // inner_'s write of one event, checked; a call event is dropped once the reader is gone.
  template <class Write>
  void write_call(Write w);
  std::unique_ptr<EventSink> inner_;
  std::FILE* out_;
  std::atomic<bool> gone_{false};
  std::atomic<bool> done_{false};
  std::atomic<int> write_error_{0};
  std::thread watcher_;
};

}  // namespace gotap::cli
