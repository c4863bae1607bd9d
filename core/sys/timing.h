// Phase times for profiling (GOTAP_TIMING=1): each mark prints, on stderr, the time since the
// previous mark and since gotap started, so that a slow command shows where its time went
// (opening the binary, planning, placing the probes, detaching), and a second line its resident
// and peak memory. Off, a mark costs one load.
#pragma once

#include <cstdint>
#include <string_view>

namespace gotap::sys {

// "gotap: timing: PHASE +X ms, cpu +C ms (Y ms, cpu D ms)" when GOTAP_TIMING is set and not
// "0": wall and CPU time (all threads) since the previous mark, and since the start.
void timing_mark(std::string_view phase);

// When this process started (steady clock, ns): a gotap run again passes its first start on
// in kRerunStartVar (huge_pages.h), so that the timing counts from the command.
int64_t process_start_ns();

// CLOCK_MONOTONIC in ns: bpf_ktime_get_ns's clock, and that of every event's ts_ns.
uint64_t monotonic_ns();
// This thread's CPU time in ns: what a piece of work costs, whatever else the machine runs.
uint64_t thread_cpu_ns();
inline constexpr const char* kRerunStartVar = "GOTAP_RERUN_START_NS";

}  // namespace gotap::sys
