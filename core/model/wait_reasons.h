// Why a goroutine waits: the names of runtime.g.waitreason's values ("chan receive", "sleep",
// "sync.Mutex.Lock", ...), which change with nearly every Go release.
#pragma once

#include <string>
#include <vector>

#include "core/model/go_version.h"

namespace gotap {

// Every name of the release, indexed by waitReason; empty when gotap has no table for it.
std::vector<std::string> wait_reason_names(const GoVersion& v);

}  // namespace gotap
