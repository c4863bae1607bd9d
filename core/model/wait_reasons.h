// Why a goroutine waits: the names of runtime.g.waitreason's values ("chan receive", "sleep",
// "sync.Mutex.Lock", ...), which change with nearly every Go release.
#pragma once

#include <string>
#include <vector>

#include "core/model/go_version.h"

namespace gotap {

// Every name of the release, indexed by waitReason; empty when gotap has no table for it.
std::vector<std::string> wait_reason_names(const GoVersion& v);

// Whether g.waitreason, read as a goroutine changes to waiting, names the wait only when
// the change is runtime.park_m's (gopark sets it first). Up to Go 1.19 the runtime's other
// changes to waiting (GC workers and assists, stopTheWorld, markroot, debug calls) set it
// after the change or never, so the value read then is a stale one. From Go 1.20 every one
// of them goes through casGToWaiting, which sets it first.
bool wait_reason_only_from_park(const GoVersion& v);

}  // namespace gotap
