#include "core/sys/uprobe_holders.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/sys/fd.h"

namespace gotap::sys {

namespace {

// The parts of struct bpf_link_info this reads, as in Linux 6.8's uapi (the system's
// linux/bpf.h may predate them). The kernel accepts a shorter or longer buffer as long as
// the bytes it does not know are zero.
constexpr uint32_t kLinkTypePerfEvent = 7;     // BPF_LINK_TYPE_PERF_EVENT
constexpr uint32_t kLinkTypeUprobeMulti = 12;  // BPF_LINK_TYPE_UPROBE_MULTI
constexpr uint32_t kPerfEventUprobe = 1;       // BPF_PERF_EVENT_UPROBE
constexpr uint32_t kPerfEventUretprobe = 2;    // BPF_PERF_EVENT_URETPROBE

struct LinkInfo {
  uint32_t type, id, prog_id, pad;
  union {
    struct {
      uint64_t path, offsets, ref_ctr_offsets, cookies;
      uint32_t path_size, count, flags, pid;
    } uprobe_multi;
    struct {
      uint32_t type, pad;
      uint64_t file_name;
      uint32_t name_len, offset;
      uint64_t cookie;
    } perf_event;
    uint8_t room[112];
  };
};
static_assert(offsetof(LinkInfo, uprobe_multi) == 16);

long bpf(int cmd, bpf_attr& attr) {
  return syscall(SYS_bpf, cmd, &attr, sizeof attr);
}

bool link_info(int fd, LinkInfo& info) {
  bpf_attr attr{};
  attr.info.bpf_fd = static_cast<uint32_t>(fd);
  attr.info.info_len = sizeof info;
  attr.info.info = reinterpret_cast<uint64_t>(&info);
  return bpf(BPF_OBJ_GET_INFO_BY_FD, attr) == 0;
}

std::string program_name(uint32_t prog_id) {
  bpf_attr attr{};
  attr.prog_id = prog_id;
  sys::Fd fd(static_cast<int>(bpf(BPF_PROG_GET_FD_BY_ID, attr)));
  if (fd.get() < 0) return "?";
  bpf_prog_info info{};
  bpf_attr ia{};
  ia.info.bpf_fd = static_cast<uint32_t>(fd.get());
  ia.info.info_len = sizeof info;
  ia.info.info = reinterpret_cast<uint64_t>(&info);
  if (bpf(BPF_OBJ_GET_INFO_BY_FD, ia) != 0) return "?";
  return std::string(info.name, strnlen(info.name, sizeof info.name));
}

bool same_file(const std::string& path, const struct stat& want) {
  struct stat st {};
  return !path.empty() && stat(path.c_str(), &st) == 0 && st.st_dev == want.st_dev &&
         st.st_ino == want.st_ino;
}

// The file mapped into gotap itself, privately: the kernel installs into a new mapping of a
// file the int3 of every uprobe whose filter takes any process (uprobe_mmap), so an int3 here
// that the file does not hold belongs to a uprobe in every process, the traced one included. A
// uprobe made for one process is not here, nor one whose process is gone: the kernel reports
// that one's pid as 0 too (task_pid_nr_ns of a dead task), as it does for "every process".
class OwnMapping {
 public:
  explicit OwnMapping(const std::string& exe) : exe_(exe) {}
  ~OwnMapping() {
    if (map_ != MAP_FAILED) munmap(map_, size_);
  }
  OwnMapping(const OwnMapping&) = delete;
  OwnMapping& operator=(const OwnMapping&) = delete;

  // Whether the uprobe at file offset `off` shows its int3 in gotap's own mapping.
  bool int3_at(uint64_t off) {
    if (!mapped_) map();
    if (map_ == MAP_FAILED || off >= size_) return false;
    uint8_t in_file = 0;
    if (pread(fd_.get(), &in_file, 1, static_cast<off_t>(off)) != 1 || in_file == 0xcc)
      return false;
    return static_cast<const uint8_t*>(map_)[off] == 0xcc;
  }

 private:
  void map() {
    mapped_ = true;
    fd_ = sys::Fd(open(exe_.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd_.get() < 0 || fstat(fd_.get(), &st) != 0 || st.st_size <= 0) return;
    size_ = static_cast<size_t>(st.st_size);
    map_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_.get(), 0);
  }
  std::string exe_;
  sys::Fd fd_;
  bool mapped_ = false;
  void* map_ = MAP_FAILED;
  size_t size_ = 0;
};

// Whether a link on `want` has its int3s in every process: one of its offsets shows one in
// gotap's own mapping (a link on another file is left to the caller's check).
bool everywhere(OwnMapping& own, const char* path, const struct stat& want,
                const std::vector<uint64_t>& offsets) {
  if (!same_file(path, want)) return false;
  for (uint64_t off : offsets)
    if (own.int3_at(off)) return true;
  return false;
}

}  // namespace

std::map<uint64_t, std::string> uprobe_holders(const std::string& exe, pid_t pid, bool certain) {
  std::map<uint64_t, std::string> out;
  struct stat want {};
  if (stat(exe.c_str(), &want) != 0) return out;
  OwnMapping own(exe);
  uint32_t id = 0;
  for (;;) {
    bpf_attr next{};
    next.start_id = id;
    if (bpf(BPF_LINK_GET_NEXT_ID, next) != 0) break;  // ENOENT: the last one
    id = next.next_id;
    bpf_attr get{};
    get.link_id = id;
    sys::Fd fd(static_cast<int>(bpf(BPF_LINK_GET_FD_BY_ID, get)));
    if (fd.get() < 0) continue;  // gone meanwhile
    char path[4096] = {};
    LinkInfo info{};
    if (!link_info(fd.get(), info)) continue;
    std::vector<uint64_t> offsets;
    if (info.type == kLinkTypeUprobeMulti) {
      // Twice: the first call says how many offsets, the second reads them with the path.
      const uint32_t n = info.uprobe_multi.count;
      if (n == 0 || n > (1u << 20)) continue;
      offsets.resize(n);
      info = LinkInfo{};
      info.uprobe_multi.path = reinterpret_cast<uint64_t>(path);
      info.uprobe_multi.path_size = sizeof path;
      info.uprobe_multi.offsets = reinterpret_cast<uint64_t>(offsets.data());
      info.uprobe_multi.count = n;
      if (!link_info(fd.get(), info) || info.type != kLinkTypeUprobeMulti) continue;
      path[sizeof path - 1] = 0;
      // Another process's tracer: two traces of two processes of one binary do not meet.
      if (pid > 0 && info.uprobe_multi.pid != 0 &&
          info.uprobe_multi.pid != static_cast<uint32_t>(pid))
        continue;
      offsets.resize(std::min<uint32_t>(n, info.uprobe_multi.count));
      // pid 0: every process, or one that is gone (a trace of another process of the binary
      // that ended, its tracer not yet closed: CI saw a ptrace trace refused for it).
      if (pid > 0 && info.uprobe_multi.pid == 0 && !everywhere(own, path, want, offsets)) continue;
    } else if (info.type == kLinkTypePerfEvent) {
      info = LinkInfo{};
      info.perf_event.file_name = reinterpret_cast<uint64_t>(path);
      info.perf_event.name_len = sizeof path;
      if (!link_info(fd.get(), info) || info.type != kLinkTypePerfEvent) continue;
      path[sizeof path - 1] = 0;
      if (info.perf_event.type != kPerfEventUprobe && info.perf_event.type != kPerfEventUretprobe)
        continue;
      offsets.push_back(info.perf_event.offset);
      // A perf-event link does not say which process it was made for; one made for every
      // process shows in gotap's own mapping, and is then surely in `pid` too.
      if (certain && !everywhere(own, path, want, offsets)) continue;
    } else {
      continue;
    }
    if (!same_file(path, want)) continue;
    const std::string who =
        "BPF program '" + program_name(info.prog_id) + "', link " + std::to_string(id);
    for (uint64_t off : offsets) out.emplace(off, who);
  }
  return out;
}

}  // namespace gotap::sys
