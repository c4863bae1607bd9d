// Runs a test body on a thread with a large stack. The views render values recursively, a
// few hundred bytes a level in gotap's own build (a record at the nesting ceiling renders
// within 1 MiB), but the sanitizer build's frames are many times that: the deep-value tests
// check linear time and the cut there too, so they get the stack that build needs.
#pragma once

#include <pthread.h>

#include <functional>
#include <stdexcept>

namespace gotap::test {

inline void run_on_big_stack(std::function<void()> body, size_t bytes = size_t(256) << 20) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t t;
  auto run = [](void* p) -> void* {
    (*static_cast<std::function<void()>*>(p))();
    return nullptr;
  };
  const int err = pthread_create(&t, &attr, run, &body);
  pthread_attr_destroy(&attr);
  if (err != 0) throw std::runtime_error("pthread_create failed");
  pthread_join(t, nullptr);
}

}  // namespace gotap::test
