#include "core/plan/parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace gotap {

size_t plan_threads() {
  cpu_set_t set;
  size_t n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp<size_t>(n, 1, 8);
}

void parallel_for(size_t n, const std::function<void(size_t)>& fn) {
  const size_t threads = n < 256 ? 1 : plan_threads();
  std::atomic<size_t> next{0};
  auto run = [&] {
    constexpr size_t kChunk = 16;
    for (size_t lo; (lo = next.fetch_add(kChunk)) < n;)
      for (size_t i = lo; i < std::min(n, lo + kChunk); ++i) fn(i);
  };
  std::vector<std::jthread> pool;
  for (size_t k = 1; k < threads; ++k) pool.emplace_back(run);
  run();
}

}  // namespace gotap
