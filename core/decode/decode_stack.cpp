#include "core/decode/decode_stack.h"

#include <pthread.h>

namespace gotap {

void reserve_thread_stacks() {
  pthread_attr_t a;
  if (pthread_getattr_default_np(&a) != 0) return;
  size_t size = 0;
  if (pthread_attr_getstacksize(&a, &size) == 0 && size < kThreadStack &&
      pthread_attr_setstacksize(&a, kThreadStack) == 0)
    pthread_setattr_default_np(&a);
  pthread_attr_destroy(&a);
}

}  // namespace gotap
