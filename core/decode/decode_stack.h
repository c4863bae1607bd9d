// The stack that decoding and rendering a value need: a value nested to the --max-depth
// ceiling takes about a kilobyte of stack per level to decode, and as much again to render
// as text or JSON. The decoder cuts a value where its thread's stack would run out
// (value_decoder.cpp, may_nest), so this is about how deep a value is shown, never a crash.
#pragma once

#include <cstddef>

namespace gotap {

// Stack for every thread gotap starts from now on (the ptrace output thread renders the
// values the tracer decoded): 16 MiB, many times what the ceiling needs, and only virtual
// until used.
constexpr size_t kThreadStack = 16 << 20;

// Makes kThreadStack the default stack size of new threads, unless it is already larger.
// The main thread's stack is the process's RLIMIT_STACK (8 MiB by default); gotap leaves
// that limit alone, since a launched program would inherit it.
void reserve_thread_stacks();

}  // namespace gotap
