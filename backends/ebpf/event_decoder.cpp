#include "backends/ebpf/event_decoder.h"

#include <cstring>
#include <optional>
#include <string>

#include "backends/ebpf/value_kind.h"
#include "core/decode/value_decoder.h"
#include "core/events/typed_events.h"
#include "core/plan/plan.h"

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

// The bytes the BPF program copied, found by the address they were copied from: what core's
// ValueDecoder may read of the tracee's memory at this event. Anything else is unreadable.
class CapturedMemory : public MemoryReader {
 public:
  void add(uint64_t addr, std::string bytes) { ranges_.push_back({addr, std::move(bytes)}); }
  bool read(uint64_t addr, void* buf, size_t n) override {
    for (const auto& [a, b] : ranges_)
      if (addr >= a && addr - a <= b.size() && n <= b.size() - (addr - a)) {
        std::memcpy(buf, b.data() + (addr - a), n);
        return true;
      }
    return false;
  }

 private:
  std::vector<std::pair<uint64_t, std::string>> ranges_;
};

int64_t sign_extend(uint64_t v, uint64_t size) {
  if (size == 0 || size >= 8) return static_cast<int64_t>(v);
  int shift = 64 - 8 * static_cast<int>(size);
  return static_cast<int64_t>(v << shift) >> shift;
}

uint64_t truncate(uint64_t v, uint64_t size) {
  if (size == 0 || size >= 8) return v;
  return v & ((uint64_t{1} << (8 * size)) - 1);
}

nlohmann::json string_value(const std::string& s, uint64_t len) {
  if (s.size() >= len) return s;
  return {{"str", s}, {"len", len}, {"truncated", true}};
}

}  // namespace

EventDecoder::EventDecoder(const ProbeConfig& cfg, const TypeGraph* types, const ElfFile* elf,
                           RtypeEnv rt, uint64_t bias, int max_str)
    : cfg_(cfg), types_(types), rt_(rt), bias_(bias), max_str_(max_str) {
  if (elf) file_.emplace(*elf);
}

// Descriptors are read in link-time addresses: the file's pointer words (an itab's type, a
// struct's field types) are link-time values, which a PIE's loader relocates only in memory.
std::optional<RType> EventDecoder::rtype(uint64_t addr) const {
  if (!file_ || !rt_.types || addr < bias_) return std::nullopt;
  addr -= bias_;
  if (addr < rt_.types || addr >= rt_.etypes) return std::nullopt;
  return read_rtype(*file_, rt_, addr);
}

std::optional<nlohmann::json> EventDecoder::interface_from_file(uint64_t w0, uint64_t w1,
                                                                std::optional<bool> eface) const {
  if (!file_ || !rt_.types || w0 < bias_) return std::nullopt;
  // Static data the value points to (a constant's string, a boxed constant) is decoded from
  // the file, where the program cannot have changed it; the rest was not captured. A PIE's
  // data word is translated to the file's addresses only when it points into the image.
  ImmutableElfMemoryReader& mem = *file_;
  uint64_t data = w1;
  uint8_t probe;
  if (bias_ && w1 >= bias_ && mem.read(w1 - bias_, &probe, 1)) data = w1 - bias_;
  DecodeEnv env;
  env.rt = rt_;
  ValueDecoder dec(mem, env, DecodeLimits{1, 16, max_str_});
  std::optional<nlohmann::json> j;
  if (eface)
    j = dec.decode_interface(w0 - bias_, data, *eface);
  else
    j = dec.guess_interface(w0 - bias_, data);
  if (!j || !j->is_object() || j->value("type", "").empty()) return std::nullopt;
  nlohmann::json& v = (*j)["value"];
  // What the file does not hold: the data word, as it was in the tracee.
  if (v.is_object() && (v.contains("unreadable") || v.contains("raw")))
    v = {{"raw", {hex(w1)}}};
  else if (v.is_object() && v.contains("addr") && !v.contains("elem"))
    v = {{"addr", hex(w1)}};
  if (!eface)
    (*j)["raw"] = {hex(w0), hex(w1)};  // a guess keeps its words, as under ptrace
  else
    j->erase("raw");
  return j;
}

nlohmann::json EventDecoder::value(const ParamCapture& pc, const gotap_event& ev) const {
  Captured c{ev, pc};
  const ParamLoc& p = *pc.param;
  ValueShape shape = pc.shape;
  if (!covers(p.loc, p.size) || p.name == "...")
    return {{"raw", nlohmann::json::array()}, {"location", "unknown"}};
  auto w0 = c.word(0);
  switch (shape) {
    case ValueShape::Bool:
      if (w0) return (*w0 & 0xff) != 0;
      break;
    case ValueShape::Int:
      if (w0) return sign_extend(*w0, p.size);
      break;
    case ValueShape::Unknown:
      // No type (a stripped binary's ArgInfo word): the word as Go's tracebacks print it,
      // cut to its size, the same as the ptrace backend shows it.
      if (w0 && pc.words.size() == 1) return {{"raw", {hex(truncate(*w0, p.size))}}};
      break;
    case ValueShape::Uint:
      if (w0) return truncate(*w0, p.size);
      break;
    case ValueShape::Float:
      if (w0) {
        if (p.size == 4) {
          float f;
          uint32_t u = static_cast<uint32_t>(*w0);
          std::memcpy(&f, &u, 4);
          return f;
        }
        double d;
        std::memcpy(&d, &*w0, 8);
        return d;
      }
      break;
    case ValueShape::String: {
      auto len = c.word(1);
      if (!len) break;
      if (*len == 0) return "";
      if (auto s = c.bytes(pc.string_cap)) return string_value(*s, *len);
      break;
    }
    case ValueShape::Pointer:
      if (w0) return *w0 == 0 ? nlohmann::json() : nlohmann::json{{"addr", hex(*w0)}};
      break;
    case ValueShape::Slice: {
      auto len = c.word(1), cap = c.word(2);
      if (w0 && *w0 == 0 && len && *len == 0) return nullptr;
      if (len && cap) {
        nlohmann::json j = {{"len", *len}, {"cap", *cap}, {"elems", nlohmann::json::array()}};
        if (*len > 0) j["truncated"] = true;
        return j;
      }
      break;
    }
    case ValueShape::Eface:
    case ValueShape::Iface: {
      if (!w0) break;
      if (*w0 == 0) return nullptr;
      std::optional<uint64_t> type = *w0;
      if (shape == ValueShape::Iface) {
        auto t = c.bytes(pc.itab_cap);
        if (t && t->size() == 8) {
          uint64_t v;
          std::memcpy(&v, t->data(), 8);
          type = v;
        } else {
          type.reset();
        }
      }
      nlohmann::json j;
      auto rt = type ? rtype(*type) : std::nullopt;
      std::string name;
      if (rt) name = rtype_name(*file_, rt_, *rt);
      j["type"] = !name.empty() ? name : (type ? hex(*type) : "?");
      auto data = c.word(1);
      nlohmann::json v = {{"raw", nlohmann::json::array()}};
      if (data) v["raw"].push_back(hex(*data));
      if (rt && data) {
        std::optional<GoKind> kind = rt->kind;
        std::optional<uint64_t> size = rt->size;
        auto payload = c.bytes(pc.payload_cap);
        bool direct = rt->direct_iface;
        auto scalar = [&](uint64_t raw) -> nlohmann::json {
          uint64_t sz = size.value_or(8);
          switch (*kind) {
            case GoKind::Bool:
              return (raw & 0xff) != 0;
            case GoKind::Int:
            case GoKind::Int8:
            case GoKind::Int16:
            case GoKind::Int32:
            case GoKind::Int64:
              return sign_extend(raw, sz);
            case GoKind::Uint:
            case GoKind::Uint8:
            case GoKind::Uint16:
            case GoKind::Uint32:
            case GoKind::Uint64:
            case GoKind::Uintptr:
              return truncate(raw, sz);
            case GoKind::Float64: {
              double d;
              std::memcpy(&d, &raw, 8);
              return d;
            }
            case GoKind::Float32: {
              float f;
              uint32_t u = static_cast<uint32_t>(raw);
              std::memcpy(&f, &u, 4);
              return f;
            }
            default:
              return nullptr;
          }
        };
        if (kind && direct && (*kind == GoKind::Ptr || *kind == GoKind::UnsafePointer))
          v = *data == 0 ? nlohmann::json() : nlohmann::json{{"addr", hex(*data)}};
        else if (kind && payload && size && *size <= 8 && payload->size() >= *size) {
          uint64_t raw = 0;
          std::memcpy(&raw, payload->data(), *size);
          auto s = scalar(raw);
          if (!s.is_null()) v = s;
        }
        // Not copied, but static (a string constant in an interface): from the file.
        if (v.is_object() && v.contains("raw") && *type >= bias_)
          if (auto f = interface_from_file(*type, *data, true);
              f && !f->at("value").contains("raw"))
            v = f->at("value");
      }
      j["value"] = v;
      return j;
    }
    case ValueShape::Other: {
      if (!p.type) {
        // Two untyped words whose first is a type descriptor or an itab: an interface, as
        // ptrace shows it (its data was not copied).
        auto w1 = c.word(1);
        if (w0 && w1 && p.size == 16)
          if (auto j = interface_from_file(*w0, *w1)) return *j;
        break;
      }
      // Structs and arrays: core's decoder over the captured registers and bytes, when every
      // piece was captured. A float register piece was not (BPF cannot read it): no guess.
      if (!types_ || !p.type || p.loc.pieces.empty()) break;
      CapturedMemory mem;
      RegState rs;
      rs.sp = 1ull << 47;  // stack pieces are placed here, as captured
      bool complete = true;
      for (const auto& piece : p.loc.pieces) {
        uint64_t slot = piece.value_offset / 8;
        if (piece.kind == LocPiece::FloatReg || piece.value_offset % 8) {
          complete = false;
        } else if (piece.kind == LocPiece::IntReg) {
          auto w = c.word(slot);
          if (!w || piece.reg >= kNumIntRegs)
            complete = false;
          else
            rs.gp[piece.reg] = *w;
        } else {
          std::string bytes;
          for (uint64_t off = 0; off < piece.size && complete; off += 8) {
            auto w = c.word(slot + off / 8);
            if (!w)
              complete = false;
            else
              bytes.append(reinterpret_cast<const char*>(&*w), 8);
          }
          if (complete) mem.add(rs.sp + piece.stack_offset, bytes.substr(0, piece.size));
        }
      }
      if (!complete) break;
      for (auto [cap, slot] : pc.field_caps)
        if (auto ptr = c.word(slot))
          if (auto b = c.bytes(cap)) mem.add(*ptr, *b);
      auto bytes = assemble_value(p.loc, p.size, rs, mem);
      if (!bytes) break;
      DecodeEnv env;
      env.types = types_;
      // Only what was captured: no pointers followed, strings as long as their copy.
      ValueDecoder dec(mem, env, DecodeLimits{0, 0, 1 << 16});
      return dec.decode(p.type, *bytes);
    }
  }
  return c.raw();
}

Event EventDecoder::decode(const void* data, size_t size) const {
  gotap_event ev{};
  const size_t header = offsetof(gotap_event, data);
  if (size < header || size > sizeof(ev)) return {};
  std::memcpy(&ev, data, size);
  if (ev.probe >= cfg_.sites.size() || ev.func_id >= cfg_.funcs.size()) return {};
  if (header + ev.data_len > size) ev.data_len = static_cast<uint16_t>(size - header);
  const SiteConfig& site = cfg_.sites[ev.probe];
  const FuncPlan& f = *cfg_.funcs[ev.func_id].plan;
  const CallSite at{ev.ts_ns, int(ev.pid), int(ev.tid), int64_t(ev.goid), f.name};
  std::vector<Param> params;
  for (const auto& pc : site.params)
    params.push_back({pc.param->name, pc.param->type_name, value(pc, ev)});
  if (ev.kind == GOTAP_EV_RETURN) {
    CallReturn r{at};
    if (!(ev.flags & GOTAP_EVF_UNMATCHED)) r.duration_ns = ev.duration_ns;
    r.results = std::move(params);
    return to_event(r);
  }
  CallEntry e{at};
  e.args = std::move(params);
  if (site.probe.flags & GOTAP_PROBE_INLINE) {
    e.inlined = true;
    e.inlined_in = site.inlined_in;
  }
  return to_event(e);
}

}  // namespace gotap::ebpf
