// Whether another tracer's jump holds a function's entry probe in a process. A probe on the
// stack check's jbe (kind "jcc": a function without a frame pointer push, or one built by Go
// before 1.21) lies where a trampoline gotap (backends/trampoline) writes: it turns a 6-byte
// jbe into a jno, and a short check's compare before a 2-byte jbe into a jump that comes
// back past the jbe. An int3 on the first would take the calls from the trampoline, which
// would count them no more, unseen; a probe on the second would see no call at all. When
// those bytes are not the file's, gotap's other backends leave the function to the tracer
// that changed them, and say so.
#pragma once

#include <cstddef>

#include "core/binary/elf_file.h"
#include "core/plan/plan.h"

namespace gotap {

// The bytes that must be the file's: from f's entry through the first two of its probe's
// instruction, for a probe on the stack check; else none (0).
size_t detour_span(const FuncPlan& f);

// Whether `live`, the process's bytes at [f.entry, f.entry + detour_span(f)), differ from
// the file's, `file`.
bool entry_probe_detoured(const FuncPlan& f, Bytes file, Bytes live);

}  // namespace gotap
