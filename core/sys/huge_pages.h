// gotap's own heap in transparent huge pages. Planning a whole binary touches 100+ MB of new
// heap, and on some virtual machines every first touch of a 4 KiB page is an exit to the
// hypervisor: a whole caddy took 25,000 page faults, a tenth to a fifth of command to armed.
// glibc backs its heap with huge pages when asked by its `glibc.malloc.hugetlb=1` tunable,
// which it reads only as a process starts: gotap runs itself again once with it, and puts
// the environment back as it was before anything else, so that the programs it launches (the
// traced program first) get the environment the user gave, untouched.
#pragma once

namespace gotap::sys {

// First thing in main, for the commands that plan. In the gotap that was run again: puts
// GLIBC_TUNABLES back as the user had it, and returns. Else runs gotap again
// (/proc/self/exe, the same arguments) with glibc's huge-page tunable, unless the user's
// GLIBC_TUNABLES names that tunable already, GOTAP_HUGE_PAGES=0, or the kernel's transparent
// huge pages are off; returns when it did not (also when the exec failed: gotap then runs as
// it is).
void rerun_with_huge_pages(char** argv);

// This gotap is the one run again, its heap in huge pages.
bool heap_in_huge_pages();

}  // namespace gotap::sys
