// The dynamic types whose values the BPF program follows inside an interface (GOTAP_CAP_CHAIN,
// bpf/value_chain.h): the standard library's error types (what their Error() text is made of),
// the net.Addr types an error names, and strings and []byte held in an `any`. Found by name in
// the binary's type descriptors and laid out from them, so it works stripped and on every
// release (a field's offset is the release's own).
#pragma once

#include <cstdint>
#include <vector>

#include "core/binary/rtype.h"
#include "core/model/go_types.h"
#include "core/model/result.h"
#include "gotap_shared.h"

namespace gotap {
class ElfFile;
class TypeNames;
struct BinaryView;
}  // namespace gotap

namespace gotap::ebpf {

struct ChainType {
  uint64_t addr = 0;  // link-time descriptor address: the `chain_types` key
  gotap_chain_type layout{};
};

// Every descriptor of the followed types in the binary (a name may have several).
std::vector<ChainType> chain_types(const ElfFile& elf, const RtypeEnv& env, const TypeNames& names);
// The same from DWARF's names: no scan of the type data (which takes most of a second on a
// 50 MB binary), one descriptor per type.
std::vector<ChainType> chain_types(const ElfFile& elf, const RtypeEnv& env, const TypeGraph& dwarf);

struct ProbeConfig;
// Fills the `chain_types` map (fd) when a site follows an interface (the type index is built
// only then).
Result<void> write_chain_types(int fd, const ProbeConfig& cfg, const BinaryView& bin);

}  // namespace gotap::ebpf
