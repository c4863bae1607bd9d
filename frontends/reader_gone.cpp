#include "frontends/reader_gone.h"
#include "core/output/writers.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "core/backend.h"

namespace gotap::cli {

namespace {

std::atomic<bool> g_sigpipe{false};

void on_sigpipe(int) {
  g_sigpipe.store(true);
  stop_requested().store(true);
}

}  // namespace

void catch_sigpipe() {
  struct sigaction sa {};
  sa.sa_handler = on_sigpipe;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

ReaderGuard::ReaderGuard(std::unique_ptr<EventSink> inner, std::FILE* out)
    : inner_(std::move(inner)), out_(out) {
  struct stat st {};
  int fd = out ? fileno(out) : -1;
  if (fd < 0 || fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return;
  // A count or latency run writes nothing until it ends, so a write cannot tell that the
  // reader left: a pipe whose reader is gone polls as POLLERR.
  watcher_ = std::thread([this, fd] {
    while (!done_.load()) {
      pollfd p{fd, 0, 0};
      if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP))) {
        mark_gone();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

ReaderGuard::~ReaderGuard() {
  done_.store(true);
  if (watcher_.joinable()) watcher_.join();
}

void ReaderGuard::mark_gone() {
  gone_.store(true);
  stop_requested().store(true);
}

void ReaderGuard::on_write_failed(int err) {
  if (!g_sigpipe.load() && err != EPIPE && err != 0 && write_error_.load() == 0)
    write_error_.store(err);
  mark_gone();
}

void ReaderGuard::emit(const Event& ev) {
  if (g_sigpipe.load()) mark_gone();
  if (gone_.load()) {
    if (ev.value("event", "") == "summary" && write_error_.load() == 0) {
      std::fprintf(stderr, "gotap: the output's reader went away; tracing stopped\n");
      make_text_writer(stderr)->emit(ev);
    }
    return;
  }
  errno = 0;
  inner_->emit(ev);
  retry_interrupted();
  if (std::ferror(out_) || g_sigpipe.load()) on_write_failed(errno);
}

template <class Write>
void ReaderGuard::write_call(Write w) {
  if (g_sigpipe.load()) mark_gone();
  if (gone_.load()) return;
  errno = 0;
  w();
  retry_interrupted();
  if (std::ferror(out_) || g_sigpipe.load()) on_write_failed(errno);
}

void ReaderGuard::emit_entry(const CallEntry& e) {
  write_call([&] { inner_->emit_entry(e); });
}
void ReaderGuard::emit_return(const CallReturn& r) {
  write_call([&] { inner_->emit_return(r); });
}
void ReaderGuard::emit_unfinished(const CallUnfinished& u) {
  write_call([&] { inner_->emit_unfinished(u); });
}

void ReaderGuard::retry_interrupted() {
  // A stop signal (no SA_RESTART) can interrupt a write: that is neither the reader leaving
  // nor a failure. stdio keeps what it could not write; write it now.
  for (int i = 0; i < 8 && std::ferror(out_) && errno == EINTR && !g_sigpipe.load(); ++i) {
    std::clearerr(out_);
    errno = 0;
    inner_->flush();
  }
}

void ReaderGuard::flush() {
  if (gone_.load()) return;
  errno = 0;
  inner_->flush();
  retry_interrupted();
  if (std::ferror(out_)) on_write_failed(errno);
}

}  // namespace gotap::cli
