// Registers the eBPF backend with core's factory (called by the front end).
#pragma once

namespace gotap::ebpf {
void register_ebpf_backend();
}  // namespace gotap::ebpf
