#pragma once

namespace gotap::trampoline {

void register_trampoline_backend();

}  // namespace gotap::trampoline
