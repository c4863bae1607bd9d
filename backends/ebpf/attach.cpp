#include "backends/ebpf/attach.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gotap::ebpf {

namespace {

// BPF_LINK_CREATE's attr for uprobe_multi (include/uapi/linux/bpf.h, Linux 6.6); Debian 12's
// headers predate it.
struct LinkCreateUprobeMulti {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;
  uint32_t pid;
  uint32_t pad;
};
constexpr int kBpfLinkCreate = 28;

}  // namespace

Attachment::Attachment(Attachment&& o) noexcept {
  *this = std::move(o);
}

Attachment& Attachment::operator=(Attachment&& o) noexcept {
  if (this != &o) {
    detach();
    multi_fds_ = std::move(o.multi_fds_);
    links_ = std::move(o.links_);
    fd_groups_ = std::move(o.fd_groups_);
    link_groups_ = std::move(o.link_groups_);
    skipped_ = std::move(o.skipped_);
    held_ = std::move(o.held_);
    method_ = o.method_;
    o.multi_fds_.clear();
    o.links_.clear();
    o.fd_groups_.clear();
    o.link_groups_.clear();
  }
  return *this;
}

namespace {

// The kernel refuses to probe this instruction (arch_uprobe_analyze_insn).
bool refused_site(int err) {
  return err == 524 /* ENOTSUPP */ || err == ENOSYS;
}

// Another uprobe holds the offset with another reference counter (uprobes.c's
// ref_ctr_offset mismatch), or the attach is wrong as a whole: the sites tell which.
bool held_site(int err) {
  return err == EINVAL;
}

long link_create_multi(int prog_fd, const std::string& path, const Site* sites, size_t n, int pid) {
  std::vector<uint64_t> offsets(n), cookies(n);
  for (size_t i = 0; i < n; ++i) {
    offsets[i] = sites[i].file_offset;
    cookies[i] = sites[i].cookie;
  }
  union {
    LinkCreateUprobeMulti a;
    char bytes[128];
  } attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.a.prog_fd = static_cast<uint32_t>(prog_fd);
  attr.a.attach_type = kAttachUprobeMulti;
  attr.a.path = reinterpret_cast<uint64_t>(path.c_str());
  attr.a.offsets = reinterpret_cast<uint64_t>(offsets.data());
  attr.a.cookies = reinterpret_cast<uint64_t>(cookies.data());
  attr.a.cnt = static_cast<uint32_t>(n);
  attr.a.pid = static_cast<uint32_t>(pid);
  return syscall(SYS_bpf, kBpfLinkCreate, &attr, sizeof(LinkCreateUprobeMulti));
}

// Whether this kernel makes uprobe_multi links, asked once as libbpf does: a link to "/" (a
// directory) fails with EBADF where they exist, EINVAL where the attach type is unknown.
bool multi_links_work(int prog_fd) {
  static const bool works = [prog_fd] {
    const Site probe{0, 0};
    const long fd = link_create_multi(prog_fd, "/", &probe, 1, 0);
    const int err = errno;
    if (fd >= 0) close(static_cast<int>(fd));
    return fd >= 0 || err == EBADF;
  }();
  return works;
}

}  // namespace

// One link for the whole range; when the kernel refuses a site, halve the range until the
// refused sites stand alone and leave them out.
Result<void> Attachment::attach_multi_range(int prog_fd, const std::string& path, const Site* sites,
                                            size_t n, int pid) {
  if (n == 0) return {};
  long fd = link_create_multi(prog_fd, path, sites, n, pid);
  if (fd >= 0) {
    multi_fds_.push_back(static_cast<int>(fd));
    fd_groups_.push_back(group_);
    return {};
  }
  int err = errno;
  // A kernel without uprobe_multi loads the program all the same and says EINVAL to every
  // link: that is no held site, and per-site uprobes serve instead.
  if (held_site(err) && !multi_links_work(prog_fd)) err = EOPNOTSUPP;
  if (!refused_site(err) && !held_site(err)) {
    errno = err;
    Error e = errno_error(ErrorKind::Runtime, "uprobe_multi attach to {}", path);
    e.errnum = err;
    return e;
  }
  if (n == 1) {
    (held_site(err) ? held_ : skipped_).push_back(sites[0]);
    return {};
  }
  GOTAP_TRY(attach_multi_range(prog_fd, path, sites, n / 2, pid));
  return attach_multi_range(prog_fd, path, sites + n / 2, n - n / 2, pid);
}

Result<Attachment> Attachment::multi(bpf_program* prog, const std::string& path,
                                     const std::vector<Site>& sites, int pid) {
  Attachment at;
  at.method_ = "uprobe_multi";
  GOTAP_TRY(at.attach_multi_range(bpf_program__fd(prog), path, sites.data(), sites.size(), pid));
  GOTAP_TRY(at.some_site_placed(sites.size()));
  return at;
}

Result<void> Attachment::some_site_placed(size_t n) const {
  const bool placed =
      std::any_of(multi_fds_.begin(), multi_fds_.end(), [](int fd) { return fd >= 0; }) ||
      std::any_of(links_.begin(), links_.end(), [](bpf_link* l) { return l != nullptr; });
  if (n == 0 || held_.empty() || placed) return {};
  // The same words on either path: the backend says the per-site one alone then.
  Error e = runtime_error(
      "the kernel refuses all {} probe sites ({} of them with EINVAL): other tracers' uprobes "
      "with a reference counter hold them, or the attach is wrong",
      n, held_.size());
  e.errnum = EINVAL;
  return e;
}

Result<Attachment> Attachment::per_site(bpf_program* prog, const std::string& path,
                                        const std::vector<Site>& sites, int pid) {
  Attachment at;
  at.method_ = "perf_event";
  at.links_.reserve(sites.size());
  GOTAP_TRY(at.attach_per_site(prog, path, sites, pid));
  GOTAP_TRY(at.some_site_placed(sites.size()));
  return at;
}

Result<void> Attachment::attach_per_site(bpf_program* prog, const std::string& path,
                                         const std::vector<Site>& sites, int pid) {
  for (const auto& s : sites) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = s.cookie);
    bpf_link* l = bpf_program__attach_uprobe_opts(prog, pid > 0 ? pid : -1, path.c_str(),
                                                  s.file_offset, &opts);
    if (!l) {
      int err = errno;
      if (refused_site(err) || held_site(err)) {
        (held_site(err) ? held_ : skipped_).push_back(s);
        continue;
      }
      Error e =
          errno_error(ErrorKind::Runtime, "uprobe at offset {:#x} of {}", s.file_offset, path);
      e.errnum = err;
      return e;
    }
    links_.push_back(l);
    link_groups_.push_back(group_);
  }
  return {};
}

namespace {

// Runs attach(first, n) for each run of sites of one group, in order (sites come sorted by
// function from the probe config, so a group is usually one run).
template <typename F>
Result<void> for_each_group(const std::vector<Site>& sites, const std::vector<uint32_t>& group_of,
                            uint32_t& group, F attach) {
  std::vector<size_t> order(sites.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return group_of[a] < group_of[b]; });
  std::vector<Site> run;
  for (size_t k = 0; k < order.size(); ++k) {
    run.push_back(sites[order[k]]);
    if (k + 1 < order.size() && group_of[order[k + 1]] == group_of[order[k]]) continue;
    group = group_of[order[k]];
    GOTAP_TRY(attach(run));
    run.clear();
  }
  return {};
}

}  // namespace

Result<Attachment> Attachment::multi_grouped(bpf_program* prog, const std::string& path,
                                             const std::vector<Site>& sites,
                                             const std::vector<uint32_t>& group_of, int pid) {
  Attachment at;
  at.method_ = "uprobe_multi";
  GOTAP_TRY(for_each_group(sites, group_of, at.group_, [&](const std::vector<Site>& run) {
    return at.attach_multi_range(bpf_program__fd(prog), path, run.data(), run.size(), pid);
  }));
  GOTAP_TRY(at.some_site_placed(sites.size()));
  return at;
}

Result<Attachment> Attachment::per_site_grouped(bpf_program* prog, const std::string& path,
                                                const std::vector<Site>& sites,
                                                const std::vector<uint32_t>& group_of, int pid) {
  Attachment at;
  at.method_ = "perf_event";
  GOTAP_TRY(for_each_group(sites, group_of, at.group_, [&](const std::vector<Site>& run) {
    return at.attach_per_site(prog, path, run, pid);
  }));
  GOTAP_TRY(at.some_site_placed(sites.size()));
  return at;
}

Result<Attachment> Attachment::place(bool multi_links, bpf_program* prog, const std::string& path,
                                     const std::vector<Site>& sites,
                                     const std::vector<uint32_t>& group_of, int pid) {
  if (group_of.empty())
    return multi_links ? multi(prog, path, sites, pid) : per_site(prog, path, sites, pid);
  return multi_links ? multi_grouped(prog, path, sites, group_of, pid)
                     : per_site_grouped(prog, path, sites, group_of, pid);
}

void Attachment::detach_group(uint32_t group) {
  for (size_t i = 0; i < multi_fds_.size(); ++i) {
    if (fd_groups_[i] != group || multi_fds_[i] < 0) continue;
    close(multi_fds_[i]);
    multi_fds_[i] = -1;
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    if (link_groups_[i] != group || !links_[i]) continue;
    bpf_link__destroy(links_[i]);
    links_[i] = nullptr;
  }
}

void Attachment::detach() {
  for (int fd : multi_fds_)
    if (fd >= 0) close(fd);
  multi_fds_.clear();
  fd_groups_.clear();
  for (bpf_link* l : links_)
    if (l) bpf_link__destroy(l);
  links_.clear();
  link_groups_.clear();
}

}  // namespace gotap::ebpf
