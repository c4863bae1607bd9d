// Decodes Go values from the traced program's memory into the JSON shapes of docs/json.md's
// Values table. Types come from DWARF (TypeGraph) or, for interface payloads and stripped
// binaries, from the runtime type descriptors (rtype.h). Backend-neutral: the ptrace backend
// reads memory with process_vm_readv, the eBPF backend from captured buffers.
#pragma once

#include <atomic>
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

// The ceilings of the user's limits (docs/cli.md): the command line refuses more, and the
// decoder clamps to them whatever it is given. A deeper decode would need more stack than
// the decoding threads are sure to have (kStackReserve), a longer string more than the
// per-event byte budget holds anyway.
constexpr int kMaxDepthCeiling = 1000;
constexpr int kMaxElemsCeiling = 10000;
constexpr int kMaxStrCeiling = 1 << 20;

struct DecodeLimits {
  int max_depth = 3;   // pointer/slice/map/interface indirections followed
  int max_elems = 16;  // slice, array and map elements shown
  int max_str = 64;    // string bytes shown
  // One event's budget, all its values together (docs/design.md, "Hostile values"): bytes
  // read from the tracee and time spent decoding. What is past it is cut and marked.
  uint64_t max_read = 16 << 20;
  uint64_t max_ns = 20'000'000;
};

struct DecodeEnv {
  const TypeGraph* types = nullptr;  // DWARF; null for stripped binaries
  RtypeEnv rt;                       // runtime addresses of the type descriptors
  // The function containing a (runtime) pc, for func values; may be empty.
  std::function<std::string(uint64_t pc)> func_name;
  // Set when the trace ends (Ctrl-C): a decode under way stops at its next read.
  const std::atomic<bool>* stop = nullptr;
};

// Register contents at a probe hit, in the order of abi.h's Reg, plus the low 8 bytes of
// X0..X14 and RSP (entry RSP for arguments, RSP at RET for results).
struct RegState {
  uint64_t gp[kNumValueRegs] = {};
  uint64_t xmm[kNumFloatRegs] = {};
  uint64_t sp = 0;
};

// Whether the pieces of `loc` cover a value of `size` bytes (the plan knows where it all is).
bool covers(const ValueLoc& loc, uint64_t size);

// The bytes of a value from its ABI location; nullopt when a stack slot is unreadable.
std::optional<std::vector<uint8_t>> assemble_value(const ValueLoc& loc, uint64_t size,
                                                   const RegState& regs, MemoryReader& mem);

class ValueDecoder {
 public:
  ValueDecoder(MemoryReader& mem, DecodeEnv env, DecodeLimits lim);
  // For the next decode calls (the eBPF backend's strings are as long as their copies).
  void set_limits(DecodeLimits lim);

  // The decode calls between begin_event() and end_event() share one event's byte and time
  // budget (DecodeLimits::max_read, max_ns); a call outside has one of its own.
  void begin_event();
  void end_event() { in_event_ = false; }
  // Whether the budget of the event (or of the last call) ran out: values were cut.
  bool budget_cut() const { return cut_; }
  // Bytes read from the tracee for the event (or the last call).
  uint64_t bytes_read() const { return read_bytes_; }

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
  // Where a non-empty interface's itab holds the dynamic type: after the interface type in
  // gc's, first in gccgo's.
  uint64_t itab_type_off() const { return env_.rt.gccgo ? 0 : 8; }

  // Whether an interface holding a value of this dynamic type (Go's %T spelling) gets the
  // text of its Error() method ("error", docs/json.md): the standard library's errors.
  static bool has_error_text(std::string_view type);

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
  // Go's Error() text of the value of dynamic type `rtype` whose interface data word is
  // `data`, composed as the standard library's methods compose it (error_text.cpp); nullopt
  // for another type, or when a part could not be read whole.
  std::optional<std::string> error_text(uint64_t rtype, uint64_t data, int depth);
  // Go's String() of a net.Addr (*net.TCPAddr, *net.UDPAddr, *net.IPAddr, *net.UnixAddr).
  std::optional<std::string> addr_text(uint64_t rtype, uint64_t data);
  nlohmann::json func_value(uint64_t funcval);
  // []byte and [N]byte: the bytes read (at most max_str) as hex, with len (and cap).
  nlohmann::json bytes_value(std::string_view read, int64_t len, std::optional<int64_t> cap);
  // time.Time's reading as Time.String() prints it, added to its struct object.
  void add_time(nlohmann::json& obj, const uint8_t* p, size_t n);
  nlohmann::json chan_value(uint64_t hchan);
  static std::string hexaddr(uint64_t v);
  // Bytes the event's budget still allows.
  uint64_t bytes_left() const;
  // A value at `addr` that could not be read: unreadable, or past the budget.
  nlohmann::json unread(uint64_t addr) const;
  // Whether `v` is a value left out by the budget: {"truncated":true}, maybe with its addr.
  static bool is_cut_mark(const nlohmann::json& v);

  // Reads through the event's budget: false, and cut_ set, once it is spent.
  class BudgetedMemory : public MemoryReader {
   public:
    explicit BudgetedMemory(ValueDecoder& d) : d_(d) {}
    bool read(uint64_t addr, void* buf, size_t n) override;
    size_t read_blocks(const uint64_t* addrs, size_t size, void* out, size_t n) override;

   private:
    ValueDecoder& d_;
  };
  // Whether `n` more bytes may be read; spends them.
  bool spend(uint64_t n);
  // Whether the budget allows more work (time, stop flag, bytes); checks the clock.
  bool within_budget();
  void fresh_read_budget();
  // Whether this frame may go one level deeper: the nesting ceiling and the stack left.
  bool may_nest();

  MemoryReader& raw_;
  BudgetedMemory mem_{*this};
  DecodeEnv env_;
  DecodeLimits lim_;
  std::unordered_map<uint64_t, TInfo> cache_;
  int budget_ = 0;  // bounds the total work of one decode call
  // Buckets or groups the maps of one decode call may still visit, all maps together: a
  // value can hold thousands of maps whose headers claim 2^31 buckets.
  int64_t map_visits_ = 0;
  void fresh_budget();
  bool in_event_ = false;
  bool cut_ = false;
  uint64_t read_bytes_ = 0;
  uint64_t deadline_ns_ = 0;
  uint32_t reads_since_clock_ = 0;
  int nesting_ = 0;            // value() frames open
  uintptr_t stack_floor_ = 0;  // below it a frame would leave less than kStackReserve
};

// One event's values decoded under one budget, for the length of a scope.
class EventBudget {
 public:
  explicit EventBudget(ValueDecoder& d) : d_(d) { d_.begin_event(); }
  ~EventBudget() { d_.end_event(); }
  EventBudget(const EventBudget&) = delete;
  EventBudget& operator=(const EventBudget&) = delete;

 private:
  ValueDecoder& d_;
};

}  // namespace gotap
