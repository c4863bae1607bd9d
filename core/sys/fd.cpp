#include "core/sys/fd.h"

#include <fcntl.h>
#include <unistd.h>

namespace gotap::sys {

void Fd::reset(int fd) {
  if (fd_ >= 0 && fd_ != fd) ::close(fd_);
  fd_ = fd;
}

Pipe make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  return {Fd(fds[0]), Fd(fds[1])};
}

}  // namespace gotap::sys
