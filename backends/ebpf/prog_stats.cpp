#include "backends/ebpf/prog_stats.h"

#include <bpf/bpf.h>

namespace gotap::ebpf {

std::optional<ProgStats> prog_stats(int prog_fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0 || info.run_cnt == 0)
    return std::nullopt;
  return ProgStats{info.run_time_ns, info.run_cnt};
}

}  // namespace gotap::ebpf
