// Instructions the x86 uprobe code refuses (arch/x86/kernel/uprobes.c: LOCK and ES/CS/SS/DS
// segment prefixes, EVEX (AVX-512), INT3/INT, port I/O, HLT), and those it would get wrong
// (`xchg rax, r8`, which it takes for a NOP): recognised up front so that one refused site
// does not fail a uprobe_multi link of thousands, and no site is probed that would change
// what the program does.
#pragma once

#include "core/binary/elf_file.h"

namespace gotap::ebpf {

// `code`: the bytes at the site (up to 16). False when the kernel is known to refuse it.
bool uprobe_can_probe(Bytes code);

}  // namespace gotap::ebpf
