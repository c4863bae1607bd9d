#include "backends/ebpf/event_decoder.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "core/events/typed_events.h"
#include "core/plan/plan.h"
#include "core/plan/stack_symbols.h"

namespace gotap::ebpf {

namespace {

struct Captured {
  const gotap_event& ev;
  const ParamCapture& pc;

  std::optional<uint64_t> word(size_t i) const {
    if (i >= pc.words.size() || pc.words[i] < 0 || pc.words[i] >= ev.nwords) return std::nullopt;
    return ev.words[pc.words[i]];
  }
  // The copied bytes of cap `c`, when it was read.
  std::optional<std::string> bytes(int c) const {
    if (c < 0 || c >= ev.ncaps || !(ev.cap_ok & (1u << c))) return std::nullopt;
    size_t off = 0;
    for (int i = 0; i < c; ++i)
      if (ev.cap_ok & (1u << i)) off += ev.cap_len[i];
    size_t len = ev.cap_len[c];
    if (off + len > ev.data_len || off + len > sizeof(ev.data)) return std::nullopt;
    return std::string(reinterpret_cast<const char*>(ev.data + off), len);
  }
  nlohmann::json raw() const {
    auto a = nlohmann::json::array();
    for (size_t i = 0; i < pc.words.size(); ++i)
      if (auto w = word(i)) a.push_back(hex(*w));
    return {{"raw", a}};
  }
};

// Stack pieces are placed here, as captured: no tracee address is this high.
constexpr uint64_t kStack = 1ull << 63;
// And pieces in the memory a register points to (LocPiece::RegMem), as far from the stack's.
constexpr uint64_t kRegMem = 3ull << 62;

}  // namespace

// The tracee's memory as far as one event shows it: the bytes the BPF program copied, at the
// addresses they were copied from; then the file's immutable bytes (type descriptors, itabs,
// constants), at their run-time addresses and relocated as a PIE's loader relocated them, so
// that core's decoder reads the same words here as ptrace reads in the tracee.
class EventMemory : public MemoryReader {
 public:
  EventMemory(const ElfFile* elf, uint64_t bias) : bias_(bias) {
    if (!elf) return;
    file_.emplace(*elf);
    for (const auto& s : elf->sections()) {
      if (s.type != SHT_RELA || !bias) continue;
      Bytes b = elf->section_data(s);
      for (size_t off = 0; off + sizeof(Elf64_Rela) <= b.size(); off += sizeof(Elf64_Rela)) {
        Elf64_Rela r;
        std::memcpy(&r, b.data() + off, sizeof r);
        if (ELF64_R_TYPE(r.r_info) == R_X86_64_RELATIVE)
          relative_.emplace_back(r.r_offset, static_cast<uint64_t>(r.r_addend));
      }
    }
    std::sort(relative_.begin(), relative_.end());
  }
  void clear() { captured_.clear(); }
  void add(uint64_t addr, std::string bytes) { captured_.push_back({addr, std::move(bytes)}); }

  bool read(uint64_t addr, void* buf, size_t n) override {
    for (const auto& [a, b] : captured_)
      if (addr >= a && addr - a <= b.size() && n <= b.size() - (addr - a)) {
        std::memcpy(buf, b.data() + (addr - a), n);
        return true;
      }
    if (!file_ || addr < bias_ || !file_->read(addr - bias_, buf, n)) return false;
    const uint64_t lo = addr - bias_;
    auto it = std::lower_bound(relative_.begin(), relative_.end(),
                               std::pair<uint64_t, uint64_t>{lo > 7 ? lo - 7 : 0, 0});
    for (; it != relative_.end() && it->first < lo + n; ++it) {
      uint64_t v = it->second + bias_;
      uint64_t from = std::max(it->first, lo), to = std::min(it->first + 8, lo + n);
      std::memcpy(static_cast<char*>(buf) + (from - lo),
                  reinterpret_cast<const char*>(&v) + (from - it->first), to - from);
    }
    return true;
  }

 private:
  uint64_t bias_;
  std::optional<ImmutableElfMemoryReader> file_;
  std::vector<std::pair<uint64_t, uint64_t>> relative_;  // (link-time offset, addend)
  std::vector<std::pair<uint64_t, std::string>> captured_;
};

EventDecoder::EventDecoder(const ProbeConfig& cfg, const TypeGraph* types, const ElfFile* elf,
                           RtypeEnv rt, uint64_t bias, int max_str,
                           std::function<std::string(uint64_t)> func_name)
    : cfg_(cfg), mem_(std::make_unique<EventMemory>(elf, bias)), max_str_(max_str), bias_(bias) {
  DecodeEnv env;
  env.types = types;
  env.func_name = std::move(func_name);
  env.rt = rt;
  if (env.rt.types) {
    env.rt.types += bias;
    env.rt.etypes += bias;
  }
  dec_ = std::make_unique<ValueDecoder>(*mem_, env, DecodeLimits{.max_str = max_str});
}

EventDecoder::~EventDecoder() = default;

nlohmann::json EventDecoder::value(const ParamCapture& pc, const gotap_event& ev) const {
  Captured c{ev, pc};
  const ParamLoc& p = *pc.param;
  // The registers and stack slots the value is in, from the captured words; a float register
  // was not captured (BPF cannot read it), nor a word past GOTAP_MAX_WORDS.
  EventMemory& mem = *mem_;
  mem.clear();
  RegState rs;
  rs.sp = kStack;
  bool captured = true;
  for (const auto& piece : p.loc.pieces) {
    uint64_t slot = piece.value_offset / 8;
    if (piece.kind == LocPiece::FloatReg || piece.value_offset % 8) {
      captured = false;
    } else if (piece.kind == LocPiece::IntReg) {
      auto w = c.word(slot);
      if (w && piece.reg < kNumValueRegs)
        rs.gp[piece.reg] = *w;
      else
        captured = false;
    } else {
      std::string bytes;
      for (uint64_t off = 0; off < piece.size; off += 8) {
        auto w = c.word(slot + off / 8);
        if (!w) break;
        bytes.append(reinterpret_cast<const char*>(&*w), 8);
      }
      if (bytes.size() < piece.size) captured = false;
      uint64_t at = rs.sp + piece.stack_offset;
      if (piece.kind == LocPiece::RegMem && piece.reg < kNumValueRegs) {
        // The buffer the register points to, where no stack slot is.
        rs.gp[piece.reg] = kRegMem;
        at = kRegMem + piece.stack_offset;
      }
      mem.add(at, bytes.substr(0, piece.size));
    }
  }
  if (!captured && covers(p.loc, p.size)) return c.raw();
  // The copies, where they were copied from: a string's bytes, the dynamic type word of an
  // itab (at itab+8), an interface's payload, a struct's string fields. A string is shown as
  // far as its copy goes (the event's data budget may have cut it short).
  DecodeLimits lim{.max_str = max_str_};
  auto copy = [&](int cap, std::optional<uint64_t> addr, std::optional<uint64_t> len = {}) {
    auto b = c.bytes(cap);
    if (!b || !addr) return;
    if (len && b->size() < std::min<uint64_t>(*len, max_str_))
      lim.max_str = std::min<int>(lim.max_str, b->size());
    mem.add(*addr, std::move(*b));
  };
  copy(pc.string_cap, c.word(0), c.word(1));
  if (auto w0 = c.word(0)) copy(pc.itab_cap, *w0 + 8);
  copy(pc.payload_cap, c.word(1));
  for (auto [cap, slot] : pc.field_caps) copy(cap, c.word(slot), c.word(slot + 1));
  // The interface's value as the kernel followed it: chunks of (address | length << 48, bytes).
  if (auto chunks = c.bytes(pc.chain_cap)) {
    for (size_t at = 0; at + 8 <= chunks->size();) {
      uint64_t hdr;
      std::memcpy(&hdr, chunks->data() + at, 8);
      const uint64_t len = hdr >> GOTAP_CHUNK_LEN_SHIFT;
      if (len > chunks->size() - at - 8) break;
      mem.add(hdr & ((1ull << GOTAP_CHUNK_LEN_SHIFT) - 1), chunks->substr(at + 8, len));
      at += 8 + len;
    }
  }
  dec_->set_limits(lim);
  // The value alone: an object around it (name, type, value) per value was most of decoding.
  nlohmann::json v = dec_->decode_param_value(p, rs);
  // An interface (only interfaces have a "type") whose data was neither copied nor in the
  // file: the data word, as it was.
  auto data = c.word(1);
  if (data && v.is_object() && v.contains("type") && v.contains("value")) {
    nlohmann::json& d = v["value"];
    if (d.is_object() && d.contains("unreadable")) d = {{"raw", {hex(*data)}}};
  }
  return v;
}

namespace {

// A call's site and values into `c`, kept from the event before: its strings and vectors are
// assigned, not built anew, so that a steady stream of calls allocates only for the values.
void fill_site(CallSite& c, const gotap_event& ev, const std::string& func, bool no_goid) {
  c.ts_ns = ev.ts_ns;
  c.pid = int(ev.pid);
  c.tid = int(ev.tid);
  c.goid = no_goid ? kNoGoid : int64_t(ev.goid);
  c.func = func;
}

}  // namespace

EventDecoder::Kind EventDecoder::decode_call(const void* data, size_t size) {
  // Not zeroed: only the header, the words and data[0..data_len) are sent and read (the
  // reads below are bounded by `size`), and zeroing the whole record cost more than them.
  gotap_event ev;
  const size_t header = offsetof(gotap_event, data);
  if (size < header || size > sizeof(ev)) return Kind::None;
  std::memcpy(&ev, data, size);
  if (ev.probe >= cfg_.sites.size() || ev.func_id >= cfg_.funcs.size()) return Kind::None;
  if (header + ev.data_len > size) ev.data_len = static_cast<uint16_t>(size - header);
  const SiteConfig& site = cfg_.sites[ev.probe];
  const FuncPlan& f = *cfg_.funcs[ev.func_id].plan;
  const bool ret = ev.kind == GOTAP_EV_RETURN;
  CallSite& at = ret ? static_cast<CallSite&>(ret_) : static_cast<CallSite&>(entry_);
  fill_site(at, ev, f.name, cfg_.no_goid);
  std::vector<Param>& params = ret ? ret_.results : entry_.args;
  params.resize(site.params.size());
  for (size_t i = 0; i < site.params.size(); ++i) {
    const ParamCapture& pc = site.params[i];
    params[i].name = pc.param->name;
    params[i].type = pc.param->type_name;
    params[i].value = value(pc, ev);
  }
  std::optional<Event>& stack = ret ? ret_.stack : entry_.stack;
  stack.reset();
  if (stack_bin_ && stack_depth_ > 0) {
    // The probed pc, then the return addresses the kernel sent after the copied bytes.
    std::vector<uint64_t> pcs = {site.addr + bias_};
    for (size_t i = 0; i < ev.nstack; ++i) {
      const size_t at_byte = size_t{ev.data_len} + i * 8;
      if (header + at_byte + 8 > size) break;
      uint64_t pc = 0;
      std::memcpy(&pc, ev.data + at_byte, 8);
      pcs.push_back(pc);
    }
    stack = symbolize(*stack_bin_, bias_, pcs, stack_depth_);
    if (site.flags & GOTAP_PROBE_INLINE) put_inlined_callee_on_top(*stack, f, stack_depth_);
  }
  if (ret) {
    // Nothing holds the goroutine under eBPF: its own time is the wall time.
    ret_.duration_ns.reset();
    ret_.wall_ns.reset();
    if (!(ev.flags & GOTAP_EVF_UNMATCHED)) ret_.duration_ns = ret_.wall_ns = ev.duration_ns;
    return Kind::Return;
  }
  entry_.inlined = site.flags & GOTAP_PROBE_INLINE;
  entry_.inlined_in.clear();
  if (entry_.inlined) entry_.inlined_in = site.inlined_in;
  return Kind::Entry;
}

Event EventDecoder::decode(const void* data, size_t size) {
  switch (decode_call(data, size)) {
    case Kind::Entry:
      return to_event(entry_);
    case Kind::Return:
      return to_event(ret_);
    case Kind::None:
      break;
  }
  return {};
}

}  // namespace gotap::ebpf
