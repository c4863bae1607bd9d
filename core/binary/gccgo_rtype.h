// gccgo's runtime type descriptors, read from the traced program's memory: the dynamic type
// of an interface value (its name, and the layout that decodes it) where gc's are read by
// rtype.h. libgo's descriptors are in libgo's image, the program's own in its data.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/binary/rtype.h"

namespace gotap {

// The descriptor at addr; nullopt when unreadable or implausible (kind, alignments, sizes).
std::optional<RType> read_gccgo_rtype(MemoryReader& mem, uint64_t addr);
// Its name as Go's reflect spells it ("main.S" for "\tmain\tmain.S").
std::string gccgo_rtype_name(MemoryReader& mem, const RType& t);
// A descriptor's string without its quoted package paths.
std::string gccgo_type_string(std::string_view s);

}  // namespace gotap
