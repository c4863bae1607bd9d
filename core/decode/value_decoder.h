// Decodes Go values from the traced program's memory into the JSON shapes of docs/json.md's
// Values table. Types come from DWARF (TypeGraph) or, for interface payloads and stripped
// binaries, from the runtime type descriptors (rtype.h). Backend-neutral: the ptrace backend
// reads memory with process_vm_readv, the eBPF backend from captured buffers.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/binary/rtype.h"
#include "core/model/go_types.h"
#include "core/plan/abi.h"

namespace gotap {

struct DecodeLimits {
  int max_depth = 3;   // pointer/slice/map/interface indirections followed
  int max_elems = 16;  // slice, array and map elements shown
  int max_str = 64;    // string bytes shown
};

struct DecodeEnv {
  const TypeGraph* types = nullptr;  // DWARF; null for stripped binaries
  RtypeEnv rt;                       // runtime addresses of the type descriptors
  // The function containing a (runtime) pc, for func values; may be empty.
  std::function<std::string(uint64_t pc)> func_name;
};

// Register contents at a probe hit, in the order of abi.h's Reg, plus the low 8 bytes of
// X0..X14 and RSP (entry RSP for arguments, RSP at RET for results).
struct RegState {
  uint64_t gp[kNumIntRegs] = {};
  uint64_t xmm[kNumFloatRegs] = {};
  uint64_t sp = 0;
};

// Whether the pieces of `loc` cover a value of `size` bytes (the plan knows where it all is).
bool covers(const ValueLoc& loc, uint64_t size);

// The bytes of a value from its ABI location; nullopt when a stack slot is unreadable.
std::optional<std::vector<uint8_t>> assemble_value(const ValueLoc& loc, uint64_t size,
                                                   const RegState& regs, MemoryReader& mem);

// Strings from the tracee are arbitrary bytes: invalid UTF-8 bytes become U+00XX so that the
// JSON stays valid and the bytes stay recoverable.
std::string sanitize_utf8(std::string_view bytes);

class ValueDecoder {
 public:
  ValueDecoder(MemoryReader& mem, DecodeEnv env, DecodeLimits lim);
  // For the next decode calls (the eBPF backend's strings are as long as their copies).
  void set_limits(DecodeLimits lim) { lim_ = lim; }

  // A value whose bytes are already assembled (registers/stack at a probe).
  nlohmann::json decode(TypeId type, std::span<const uint8_t> bytes);
  // A value in memory.
  nlohmann::json decode_at(TypeId type, uint64_t addr);
  // An interface from its two words: eface (type, data) or iface (itab, data).
  nlohmann::json decode_interface(uint64_t w0, uint64_t data, bool eface);
  // Without DWARF: a two-word argument whose first word is a type descriptor or an itab is
  // decoded as an interface; nullopt when it does not look like one.
  std::optional<nlohmann::json> guess_interface(uint64_t w0, uint64_t w1);
  // A whole parameter: {"name","type","value"}.
  nlohmann::json decode_param(const ParamLoc& p, const RegState& regs);
  // Its value alone, without the object around it (the eBPF decoder's per-event path).
  nlohmann::json decode_param_value(const ParamLoc& p, const RegState& regs);

  // The address of the element of the map at `hmap` (DWARF type `map_type`) whose key is
  // `key`: a string key's bytes, else the key's own bytes; nullopt when absent or unreadable.
  // The whole map is searched (bounded as decoding is), not only the entries shown.
  std::optional<uint64_t> map_find(TypeId map_type, uint64_t hmap, bool string_key,
                                   std::string_view key);

  // The dynamic type name of a descriptor, or "".
  std::string type_name_of_rtype(uint64_t rtype_addr);

 private:
  struct TField {
    std::string name;
    uint64_t type = 0;
    uint64_t offset = 0;
  };
  // One view over DWARF types and runtime type descriptors.
  struct TInfo {
    GoKind kind = GoKind::Invalid;
    uint64_t size = 0;
    std::string name;
    uint64_t elem = 0, key = 0;  // type refs
    int64_t len = 0;
    std::vector<TField> fields;
    uint64_t rtype = 0;     // descriptor address, 0 when unknown
    bool eface = false;     // Interface: no methods
    bool duration = false;  // time.Duration: shown as Go prints it
    bool valid = false;
  };
  static constexpr uint64_t kRtypeTag = 1ull << 63;  // ref = addr | tag for descriptors

  const TInfo& info(uint64_t ref);
  TInfo from_dwarf(TypeId id);
  TInfo from_rtype(uint64_t addr);

  nlohmann::json value(uint64_t ref, const uint8_t* p, size_t n, int depth);
  nlohmann::json value_at(uint64_t ref, uint64_t addr, int depth);
  nlohmann::json string_value(uint64_t ptr, int64_t len);
  nlohmann::json slice_value(uint64_t elem, uint64_t ptr, int64_t len, int64_t cap, int depth);
  nlohmann::json map_value(const TInfo& t, uint64_t hmap, int depth);
  // Calls each(key address, element address) per entry of the map until it returns false;
  // false when the map's header is unreadable.
  bool map_slots(const TInfo& t, uint64_t hmap,
                 const std::function<bool(uint64_t, uint64_t)>& each);
  nlohmann::json iface_value(uint64_t w0, uint64_t data, bool eface, int depth);
  nlohmann::json func_value(uint64_t funcval);
  // []byte and [N]byte: the bytes read (at most max_str) as hex, with len (and cap).
  nlohmann::json bytes_value(std::string_view read, int64_t len, std::optional<int64_t> cap);
  // time.Time's reading as Time.String() prints it, added to its struct object.
  void add_time(nlohmann::json& obj, const uint8_t* p, size_t n);
  nlohmann::json chan_value(uint64_t hchan);
  static std::string hexaddr(uint64_t v);

  MemoryReader& mem_;
  DecodeEnv env_;
  DecodeLimits lim_;
  std::unordered_map<uint64_t, TInfo> cache_;
  int budget_ = 0;  // bounds the total work of one decode call
  // Buckets or groups the maps of one decode call may still visit, all maps together: a
  // value can hold thousands of maps whose headers claim 2^31 buckets.
  int64_t map_visits_ = 0;
  void fresh_budget();
};

}  // namespace gotap
