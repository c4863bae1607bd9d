// One gotap at a time checks and places, or removes, probes in one executable. Each backend
// looks for another tracer's int3 at a site before it writes its own; two gotaps started at
// once (one on ptrace, one on eBPF) could both look before either wrote, and both go blind:
// the kernel's uprobe takes every trap of the ptrace gotap's int3, and that gotap's restore
// writes the original byte over the uprobe's (docs/design.md, "Two tracers at once").
//
// The lock is an flock on the executable itself: it names the inode whatever path or mount
// namespace each gotap reached it by, whichever user runs it, and the kernel drops it when
// a gotap dies. It is held from the check to the last probe placed, and while probes are
// removed, never while tracing.
#pragma once

#include <atomic>
#include <string>

#include "core/model/result.h"
#include "core/sys/fd.h"

namespace gotap::sys {

class ImageLock {
 public:
  // How long one gotap waits for another: to place (a whole binary's probes take seconds),
  // and to remove, which must go on even when the holder is stuck.
  static constexpr int kPlaceWaitMs = 60000;
  static constexpr int kRemoveWaitMs = 10000;

  ImageLock() = default;
  // Locks the file `path` names (e.g. /proc/PID/exe; `name` in messages). Waits while another
  // process holds it, up to `timeout_ms` or until `*stop` is set; then a runtime error (one
  // line) says so.
  static Result<ImageLock> take(const std::string& path, const std::string& name, int timeout_ms,
                                const std::atomic<bool>* stop = nullptr);
  bool held() const { return bool(fd_); }
  void release() { fd_.reset(); }

 private:
  explicit ImageLock(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

}  // namespace gotap::sys
