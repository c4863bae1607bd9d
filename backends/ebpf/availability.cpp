// Whether the eBPF backend can work here: privileges (root, or CAP_BPF with CAP_PERFMON),
// the bpf() syscall, and the uprobe PMU that libbpf and uprobe_multi need.
#include <bpf/bpf.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/ebpf/ebpf_backend.h"

namespace gotap::ebpf {

namespace {

constexpr int kCapBpf = 39;
constexpr int kCapPerfmon = 38;

bool has_caps() {
  if (geteuid() == 0) return true;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  auto eff = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1; };
  return (eff(kCapBpf) && eff(kCapPerfmon)) || eff(CAP_SYS_ADMIN);
}

}  // namespace

std::string unavailable_reason() {
  if (!has_caps()) return "needs root (or CAP_BPF and CAP_PERFMON)";
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "gotap_probe", 4, 8, 1, nullptr);
  if (fd < 0) return std::string("BPF does not work here: ") + std::strerror(errno);
  close(fd);
  std::ifstream pmu("/sys/bus/event_source/devices/uprobe/type");
  int type = -1;
  if (!(pmu >> type)) return "the kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS)";
  return "";
}

}  // namespace gotap::ebpf
