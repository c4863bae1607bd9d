// Test hooks that widen a window on purpose, so that a runtime test lands in it each run.
#pragma once

namespace gotap::sys {

// When the environment variable `name` holds N (1 to 60000), says "gotap: test: `what` in N
// ms" on stderr, then waits N ms: a test reads that line to act inside the window.
void test_delay(const char* name, const char* what);

}  // namespace gotap::sys
