#include "backends/ebpf/register.h"

#include "backends/ebpf/ebpf_backend.h"

namespace gotap::ebpf {

void register_ebpf_backend() {
  register_backend(BackendInfo{"ebpf", [] { return unavailable_reason(); },
                               [] { return std::unique_ptr<Backend>(new EbpfBackend()); }});
}

}  // namespace gotap::ebpf
