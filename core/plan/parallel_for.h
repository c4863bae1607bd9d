// Planning's thread pool: a whole binary's functions are planned (and a cached plan's checked)
// on every CPU gotap may run on.
#pragma once

#include <cstddef>
#include <functional>

namespace gotap {

// How many threads planning uses: every CPU gotap may run on, at most 8.
size_t plan_threads();

// Runs fn(i) for each i in [0, n) on every CPU: threads take the next few items as they
// finish (function sizes vary a thousandfold), so callers keep each item's results apart
// and take them back in order. One thread when n is too small to be worth more.
void parallel_for(size_t n, const std::function<void(size_t)>& fn);

}  // namespace gotap
