// The one Zydis decoder of 64-bit code, full mode, that gotap's instruction analyses share
// (disasm.h's function facts, jump_site.h's displaced instructions, ptrace's breakpoint
// classification). Zydis decoders hold no state between calls: one serves every thread.
#pragma once

#include <Zydis/Zydis.h>

namespace gotap {

const ZydisDecoder* zydis_decoder();

}  // namespace gotap
