// One owner per file descriptor: closing lives in one place instead of on every error path.
#pragma once

#include <utility>

namespace gotap::sys {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  // Closes the descriptor held (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A pipe whose ends are closed on exec; both invalid when pipe2 failed (errno says why).
struct Pipe {
  Fd read, write;
};
Pipe make_pipe();

}  // namespace gotap::sys
