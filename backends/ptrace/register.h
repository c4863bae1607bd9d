// Registers the ptrace backend with core's backend factory (called by the front end).
#pragma once

namespace gotap::ptrace {

void register_ptrace_backend();

}  // namespace gotap::ptrace
