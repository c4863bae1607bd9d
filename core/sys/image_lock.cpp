#include "core/sys/image_lock.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>

#include <cerrno>
#include <chrono>

namespace gotap::sys {

Result<ImageLock> ImageLock::take(const std::string& path, const std::string& name, int timeout_ms,
                                  const std::atomic<bool>* stop) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno_error(ErrorKind::Runtime, "cannot open {} to lock it", name);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Polled rather than blocking: a stop request ends the wait, and so does the deadline,
  // whoever holds the lock (a gotap stuck in a stopped program's removal, or a program that
  // locks its own executable).
  while (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return errno_error(ErrorKind::Runtime, "cannot lock {}", name);
    if (stop && stop->load())
      return runtime_error(
          "stopped while waiting for another gotap to place or remove its "
          "probes in {}",
          name);
    if (std::chrono::steady_clock::now() >= until)
      return runtime_error(
          "{} stayed locked for {} s: another gotap is placing or removing "
          "its probes there (or a process holds an flock on it)",
          name, timeout_ms / 1000);
    poll(nullptr, 0, 5);
  }
  return ImageLock(std::move(fd));
}

}  // namespace gotap::sys
