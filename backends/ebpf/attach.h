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
  // --max-overhead: one link (or set of perf-event uprobes) per group, so that one group's
  // uprobes can go without touching the others'. group_of[i] is sites[i]'s group.
  static Result<Attachment> multi_grouped(bpf_program* prog, const std::string& path,
                                          const std::vector<Site>& sites,
                                          const std::vector<uint32_t>& group_of, int pid);
  static Result<Attachment> per_site_grouped(bpf_program* prog, const std::string& path,
                                             const std::vector<Site>& sites,
                                             const std::vector<uint32_t>& group_of, int pid);
  // multi_grouped or multi (multi_links), per_site_grouped or per_site: grouped when group_of
  // is not empty.
  static Result<Attachment> place(bool multi_links, bpf_program* prog, const std::string& path,
                                  const std::vector<Site>& sites,
                                  const std::vector<uint32_t>& group_of, int pid);
  // Removes the uprobes of one group; the others stay, never detached even for a moment.
  void detach_group(uint32_t group);
  void detach();
  const char* method() const { return method_; }
  const std::vector<Site>& skipped() const { return skipped_; }
  // Sites another tracer's uprobe holds with a reference counter (a USDT semaphore; Debian's
  // bcc 0.26 sets a stray one on every uprobe): the kernel lets no uprobe with another
  // counter share the offset (EINVAL). Left out, as skipped() are; when every site is, the
  // attach fails instead (EINVAL then says nothing about any one site).
  const std::vector<Site>& held() const { return held_; }

 private:
  Result<void> attach_multi_range(int prog_fd, const std::string& path, const Site* sites, size_t n,
                                  int pid);
  Result<void> attach_per_site(bpf_program* prog, const std::string& path,
                               const std::vector<Site>& sites, int pid);
  Result<void> some_site_placed(size_t n) const;
  std::vector<int> multi_fds_;
  std::vector<Site> skipped_, held_;
  std::vector<bpf_link*> links_;
  // Each fd's and link's group (all 0 without groups), parallel to multi_fds_ and links_.
  std::vector<uint32_t> fd_groups_, link_groups_;
  uint32_t group_ = 0;  // the group being attached
  const char* method_ = "none";
};

// The expected attach type a program must be loaded with to go into a uprobe_multi link.
constexpr int kAttachUprobeMulti = 48;  // BPF_TRACE_UPROBE_MULTI

}  // namespace gotap::ebpf
