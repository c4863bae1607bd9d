#include "backends/ebpf/cond_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

namespace gotap::ebpf {

uint32_t held_capacity(const cond::Condition* cond, Mode mode) {
  if (!cond || mode != Mode::Trace) return 1;
  for (size_t i = 0; i < cond->funcs.size(); ++i)
    if (cond->at_ret(i)) return 4096;
  return 1;
}

Result<void> load_conditions(bpf_map* conds, const cond::Condition& cond, const ProbePlan& plan,
                             int tgid) {
  uint64_t bias = tgid > 0 ? plan.binary_view.load_bias(tgid).value_or(0) : 0;
  int fd = bpf_map__fd(conds);
  for (uint32_t i = 0; i < cond.funcs.size(); ++i) {
    gotap_cond p = cond.funcs[i].prog;
    for (auto& in : p.insns) {
      if (in.op == GOTAP_COP_CONST && in.a == 1) {
        in.imm += bias;
        in.a = 0;
      }
    }
    if (bpf_map_update_elem(fd, &i, &p, BPF_ANY) != 0)
      return errno_error(ErrorKind::Runtime, "cannot load the condition of {}", plan.funcs[i].name);
  }
  return {};
}

}  // namespace gotap::ebpf
