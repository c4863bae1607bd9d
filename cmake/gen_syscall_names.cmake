# Writes OUT, the x86-64 system call names by number for --why's `syscalls`, from HEADER (the
# system's <asm/unistd_64.h>): one `{NR, "name"},` line per `#define __NR_name NR`.
file(STRINGS ${HEADER} lines REGEX "^#define __NR_[a-z0-9_]+ [0-9]+$")
set(body "")
foreach(l ${lines})
  string(REGEX REPLACE "^#define __NR_([a-z0-9_]+) ([0-9]+)$" "{\\2, \"\\1\"}," entry "${l}")
  string(APPEND body "${entry}\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from ${HEADER} by cmake/gen_syscall_names.cmake.\n${body}")
file(RENAME ${OUT}.tmp ${OUT})
