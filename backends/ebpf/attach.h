// Attaching one BPF program to many uprobe sites: one uprobe_multi link (Linux >= 6.6, raw
// BPF_LINK_CREATE since libbpf 1.1 has no wrapper), or one perf-event uprobe per site through
// libbpf. Detaching is closing the links (RAII).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/result.h"

struct bpf_program;
struct bpf_link;

namespace gotap::ebpf {

struct Site {
  uint64_t file_offset = 0;
  uint64_t cookie = 0;
};

class Attachment {
 public:
  Attachment() = default;
  Attachment(Attachment&& o) noexcept;
  Attachment& operator=(Attachment&& o) noexcept;
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;
  ~Attachment() { detach(); }

  // pid 0: every process that maps `path`. Sites whose instruction the kernel refuses to
  // probe (EVEX-encoded AVX-512, for one) are left out and listed in skipped().
  static Result<Attachment> multi(bpf_program* prog, const std::string& path,
                                  const std::vector<Site>& sites, int pid);
  static Result<Attachment> per_site(bpf_program* prog, const std::string& path,
                                     const std::vector<Site>& sites, int pid);
  void detach();
  const char* method() const { return method_; }
  const std::vector<Site>& skipped() const { return skipped_; }

 private:
  Result<void> attach_multi_range(int prog_fd, const std::string& path, const Site* sites, size_t n,
                                  int pid);
  std::vector<int> multi_fds_;
  std::vector<Site> skipped_;
  std::vector<bpf_link*> links_;
  const char* method_ = "none";
};

// The expected attach type a program must be loaded with to go into a uprobe_multi link.
constexpr int kAttachUprobeMulti = 48;  // BPF_TRACE_UPROBE_MULTI

}  // namespace gotap::ebpf
