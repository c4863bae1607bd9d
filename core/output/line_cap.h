// A cap on the size of one event's values: with a deep --max-depth one call's arguments can
// be hundreds of kilobytes (200 KB on an etcd request), more than a terminal, a log line or
// a pipe reader wants. Values past the cap are cut where they are, and marked as cut.
#pragma once

#include <cstddef>
#include <memory>

#include "core/events/events.h"

namespace gotap {

constexpr size_t kDefaultMaxLine = 16384;  // bytes of values per event (--max-line)
// The largest --max-line: a cap above the JSON that one event's read budget can yield is no cap.
constexpr int kMaxLineCeiling = 64 << 20;

// The event with its args' and results' values cut to about `max_bytes` of JSON in all,
// first values first: a slice's, array's or map's elements and a struct's fields past the
// budget are left out and the value marked "truncated":true, a pointee past it is dropped
// (the pointer keeps its address and gets "truncated":true). A cut event gets
// "truncated":true. Events within the cap, and other kinds, come back unchanged.
Event cap_event_values(const Event& ev, size_t max_bytes);

// Passes every event through cap_event_values to `inner`; 0 means no cap.
std::unique_ptr<EventSink> make_line_cap(std::unique_ptr<EventSink> inner, size_t max_bytes);

}  // namespace gotap
