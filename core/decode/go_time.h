// time.Duration and time.Time as Go's own String methods print them, so that a traced value
// reads as the program would log it ("5m0s", "2026-11-24 19:40:00.5 +0000 UTC").
#pragma once

#include <cstdint>
#include <string>

namespace gotap {

// Duration.String(): "0s", "1.5µs", "300ms", "1h2m3.5s", "-2s".
std::string format_go_duration(int64_t ns);

// The instant a time.Time's wall and ext words hold, in Unix seconds and nanoseconds, and
// its monotonic reading when it has one (Go's wall/ext encoding, time/time.go).
struct GoInstant {
  int64_t unix_sec = 0;
  int32_t nsec = 0;
  bool has_mono = false;
  int64_t mono_ns = 0;
  bool valid = true;  // false when the words hold no representable instant (tracee garbage)
};
GoInstant go_instant(uint64_t wall, int64_t ext);

// Time.String() for a zone with `offset_s` east of UTC named `zone`:
// "2006-01-02 15:04:05.999999999 -0700 MST", plus " m=+0.007218001" with a monotonic reading.
// "" when the instant or the offset is out of range (the words were not a real time.Time).
std::string format_go_time(const GoInstant& t, int64_t offset_s, const std::string& zone);

}  // namespace gotap
