// Go runtime type descriptors (runtime._type / internal/abi.Type and the kind-specific
// extensions) read from tracee memory or from the ELF image. They exist in every Go binary,
// stripped or not: they name the dynamic type of an interface value and, with DWARF, lead
// to its layout (DW_AT_go_runtime_type = descriptor address - moduledata.types).
// Layouts: Go's src/internal/abi/type.go (runtime/type.go before Go 1.21).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/model/go_types.h"
#include "core/model/go_version.h"

namespace gotap {

// Reads bytes of the traced program's address space. Implementations: the ptrace backend's
// process_vm_readv reader, the ELF image (ElfMemoryReader), test buffers.
class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  // All n bytes or false.
  virtual bool read(uint64_t addr, void* buf, size_t n) = 0;
  // The `size` bytes at each of addrs[0..n), one after the other into out: how many of the
  // first blocks were read (it stops at the first it cannot read). A reader whose reads are
  // system calls does them together: a map's tables are thousands, scattered on the heap.
  virtual size_t read_blocks(const uint64_t* addrs, size_t size, void* out, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (!read(addrs[i], static_cast<uint8_t*>(out) + i * size, size)) return i;
    return n;
  }
  size_t read_words(const uint64_t* addrs, uint64_t* out, size_t n) {
    return read_blocks(addrs, 8, out, n);
  }

  std::optional<uint64_t> u64(uint64_t addr) {
    uint64_t v;
    if (!read(addr, &v, 8)) return std::nullopt;
    return v;
  }
  std::optional<uint32_t> u32(uint64_t addr) {
    uint32_t v;
    if (!read(addr, &v, 4)) return std::nullopt;
    return v;
  }
  std::optional<uint8_t> u8(uint64_t addr) {
    uint8_t v;
    if (!read(addr, &v, 1)) return std::nullopt;
    return v;
  }
};

// The file-backed bytes of an ELF image loaded at `bias` (0 for non-PIE).
class ElfMemoryReader : public MemoryReader {
 public:
  ElfMemoryReader(const ElfFile& elf, uint64_t bias) : elf_(elf), bias_(bias) {}
  bool read(uint64_t addr, void* buf, size_t n) override;

 private:
  const ElfFile& elf_;
  uint64_t bias_;
};

// Only the file bytes a running program cannot have changed: read-only segments and the
// RELRO range (read-only once relocated). Type descriptors, itabs and string constants are
// there; global variables, whose file bytes are only their initial values, are not. For
// decoding without access to the tracee's memory (the eBPF backend). Link-time addresses.
class ImmutableElfMemoryReader : public MemoryReader {
 public:
  explicit ImmutableElfMemoryReader(const ElfFile& elf);
  bool read(uint64_t addr, void* buf, size_t n) override;

 private:
  const ElfFile& elf_;
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;  // [lo, hi)
};

// Where the type descriptors live at run time (moduledata.types/etypes plus the load bias).
struct RtypeEnv {
  GoVersion go;
  uint64_t types = 0, etypes = 0;
  bool swiss_maps = false;  // Go >= 1.24 without GOEXPERIMENT=noswissmap
  // gccgo: libgo's descriptors (gccgo_rtype.h), and an itab's first word is the type.
  bool gccgo = false;
};

struct RField {
  std::string name;
  uint64_t type = 0;  // descriptor address
  uint64_t offset = 0;
  bool embedded = false;
};

struct RType {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t ptrbytes = 0;
  GoKind kind = GoKind::Invalid;
  uint8_t tflag = 0;
  bool direct_iface = false;  // the interface data word holds the value itself
  int32_t str = 0;
  uint64_t elem = 0;  // Ptr, Slice, Array, Chan, Map (value)
  uint64_t key = 0;   // Map
  int64_t len = 0;    // Array
  // Map layout (swiss: group_size and where slot i's key and elem are in a group,
  // keys_off + i * key_stride and elems_off + i * elem_stride, which 1.27's descriptor states
  // and earlier ones imply from the slot size and elem offset; bucket maps: key_size/
  // value_size/bucket_size). map_flags as in the map type descriptor.
  uint64_t group_size = 0, keys_off = 0, key_stride = 0, elems_off = 0, elem_stride = 0;
  uint8_t key_size = 0, value_size = 0;
  uint16_t bucket_size = 0;
  uint32_t map_flags = 0;
  bool swiss = false;
  std::vector<RField> fields;  // Struct
  uint64_t gccgo_string = 0;   // gccgo: the address of its name's Go string
  uint64_t gccgo_methods = 0;  // gccgo interface: how many methods (0: interface {})
};

constexpr uint8_t kTflagUncommon = 1, kTflagExtraStar = 2, kTflagNamed = 4;

// The kind of the descriptor whose first 48 bytes are at hdr; Invalid when those bytes cannot
// be one (an unknown kind, alignments that are not powers of two, pointer bytes past the size).
GoKind descriptor_kind(const uint8_t* hdr, const GoVersion& go);
// Reads a descriptor at addr; nullopt when unreadable or implausible (descriptor_kind).
std::optional<RType> read_rtype(MemoryReader& mem, const RtypeEnv& env, uint64_t addr);
// The type's Go spelling ("main.Point", "*errors.errorString", "map[string]int").
std::string rtype_name(MemoryReader& mem, const RtypeEnv& env, const RType& t);
// An abi.Name at addr: flags byte, then the length (uvarint; 2 bytes big-endian <= 1.16).
std::optional<std::string> read_type_name(MemoryReader& mem, const GoVersion& go, uint64_t addr,
                                          uint8_t* flags = nullptr);

}  // namespace gotap
