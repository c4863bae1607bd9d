#include "frontends/register_backends.h"

#ifdef GOTAP_HAVE_PTRACE
#include "backends/ptrace/register.h"
#include "backends/trampoline/register.h"
#endif
#ifdef GOTAP_HAVE_EBPF
#include "backends/ebpf/register.h"
#endif

namespace gotap::cli {

void register_backends() {
  static bool done = false;
  if (done) return;
  done = true;
#ifdef GOTAP_HAVE_EBPF
  gotap::ebpf::register_ebpf_backend();
#endif
#ifdef GOTAP_HAVE_PTRACE
  gotap::ptrace::register_ptrace_backend();
  gotap::trampoline::register_trampoline_backend();
#endif
}

}  // namespace gotap::cli
