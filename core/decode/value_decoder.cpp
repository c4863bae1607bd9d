#include "core/decode/value_decoder.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "core/decode/go_time.h"
#include "core/model/json_utf8.h"
#include "core/sys/timing.h"

namespace gotap {

using nlohmann::json;

namespace {

constexpr int kBudget = 20000;               // values decoded per decode call
constexpr uint64_t kMaxValueRead = 1 << 16;  // bytes read at once for one value
// Groups or buckets visited per map, and per decode call. Each costs at least an 8-byte
// read, so the event's byte and time budget bound them too; these keep a value of many
// maps from spending it all on the first.
constexpr uint64_t kMaxMapGroups = 1 << 20;
constexpr int64_t kMaxMapVisits = 1 << 21;
constexpr size_t kWordBatch = 1024;         // control words or tophashes read at once
constexpr uint64_t kDenseStride = 1024;     // groups or buckets closer: read whole
constexpr uint64_t kChunkBytes = 64 << 10;  // at most this at once

// value() frames open at once: a pointer level of a linked list is two (the pointer and the
// struct it points to), an interface level three; a struct inside a struct one more.
constexpr int kMaxNesting = 4 * kMaxDepthCeiling + 256;
// Stack that a decode leaves free below its deepest value() frame: for the frames under it
// (reads, type descriptors, formatting), so that a thread whose stack is smaller than the
// ceiling needs cuts the value instead of overflowing.
constexpr uintptr_t kStackReserve = 256 << 10;

// The lowest address this thread's frames may reach with kStackReserve still free, once
// per thread (for the main thread glibc reads /proc/self/maps to answer).
uintptr_t stack_floor() {
  thread_local uintptr_t floor = [] {
    pthread_attr_t a;
    void* lo = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      pthread_attr_getstack(&a, &lo, &size);
      pthread_attr_destroy(&a);
    }
    // Unknown: assume the smallest stack a thread gets by default (ulimit -s can lower it),
    // counted from here.
    if (!lo || !size) {
      const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
      return here > (1u << 20) ? here - (1u << 20) + kStackReserve : uintptr_t(0);
    }
    return reinterpret_cast<uintptr_t>(lo) + kStackReserve;
  }();
  return floor;
}

uint64_t word(const uint8_t* p, size_t n, size_t off) {
  uint64_t v = 0;
  if (off < n) std::memcpy(&v, p + off, std::min<size_t>(8, n - off));
  return v;
}

uint64_t align_up(uint64_t v, uint64_t a) {
  return a ? (v + a - 1) / a * a : v;
}

}  // namespace

bool covers(const ValueLoc& loc, uint64_t size) {
  uint64_t n = 0;
  for (const auto& pc : loc.pieces) n += pc.size;
  return n >= size;
}

std::optional<std::vector<uint8_t>> assemble_value(const ValueLoc& loc, uint64_t size,
                                                   const RegState& regs, MemoryReader& mem) {
  std::vector<uint8_t> out(size, 0);
  for (const auto& pc : loc.pieces) {
    if (pc.value_offset > size || pc.size > size - pc.value_offset) return std::nullopt;
    uint8_t* dst = out.data() + pc.value_offset;
    switch (pc.kind) {
      case LocPiece::IntReg:
        if (pc.reg >= kNumValueRegs || pc.reg_byte > 7) return std::nullopt;
        std::memcpy(dst, reinterpret_cast<const uint8_t*>(&regs.gp[pc.reg]) + pc.reg_byte,
                    std::min<uint32_t>(pc.size, 8 - pc.reg_byte));
        break;
      case LocPiece::FloatReg:
        if (pc.reg >= kNumFloatRegs || pc.reg_byte > 7) return std::nullopt;
        std::memcpy(dst, reinterpret_cast<const uint8_t*>(&regs.xmm[pc.reg]) + pc.reg_byte,
                    std::min<uint32_t>(pc.size, 8 - pc.reg_byte));
        break;
      case LocPiece::Stack:
        if (pc.size && !mem.read(regs.sp + pc.stack_offset, dst, pc.size)) return std::nullopt;
        break;
      case LocPiece::RegMem:
        if (pc.reg >= kNumValueRegs || !regs.gp[pc.reg]) return std::nullopt;
        if (pc.size && !mem.read(regs.gp[pc.reg] + pc.stack_offset, dst, pc.size))
          return std::nullopt;
        break;
    }
  }
  return out;
}

ValueDecoder::ValueDecoder(MemoryReader& mem, DecodeEnv env, DecodeLimits lim)
    : raw_(mem), env_(std::move(env)) {
  set_limits(lim);
  fresh_read_budget();
}

void ValueDecoder::set_limits(DecodeLimits lim) {
  lim.max_depth = std::clamp(lim.max_depth, 0, kMaxDepthCeiling);
  lim.max_elems = std::clamp(lim.max_elems, 0, kMaxElemsCeiling);
  lim.max_str = std::clamp(lim.max_str, 0, kMaxStrCeiling);
  lim_ = lim;
}

void ValueDecoder::begin_event() {
  fresh_read_budget();
  in_event_ = true;
}

void ValueDecoder::fresh_read_budget() {
  cut_ = false;
  read_bytes_ = 0;
  deadline_ns_ = lim_.max_ns ? sys::monotonic_ns() + lim_.max_ns : 0;
  stack_floor_ = stack_floor();
}

bool ValueDecoder::within_budget() {
  if (cut_) return false;
  if ((env_.stop && env_.stop->load(std::memory_order_relaxed)) ||
      (deadline_ns_ && sys::monotonic_ns() > deadline_ns_))
    cut_ = true;
  return !cut_;
}

bool ValueDecoder::spend(uint64_t n) {
  if (!within_budget()) return false;
  if (n > lim_.max_read - std::min(read_bytes_, lim_.max_read)) {
    cut_ = true;
    return false;
  }
  read_bytes_ += n;
  return true;
}

bool ValueDecoder::may_nest() {
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (nesting_ < kMaxNesting && here > stack_floor_) return true;
  cut_ = true;
  return false;
}

bool ValueDecoder::BudgetedMemory::read(uint64_t addr, void* buf, size_t n) {
  return d_.spend(n) && d_.raw_.read(addr, buf, n);
}

size_t ValueDecoder::BudgetedMemory::read_blocks(const uint64_t* addrs, size_t size, void* out,
                                                 size_t n) {
  // In batches, with the clock and the stop flag looked at between them.
  size_t done = 0;
  while (done < n) {
    const size_t k = std::min(kWordBatch, n - done);
    if (!d_.spend(size * k)) return done;
    const size_t got =
        d_.raw_.read_blocks(addrs + done, size, static_cast<uint8_t*>(out) + done * size, k);
    done += got;
    if (got < k) return done;
  }
  return n;
}

std::string ValueDecoder::hexaddr(uint64_t v) {
  return fmt::format("{:#x}", v);
}

uint64_t ValueDecoder::bytes_left() const {
  return cut_ ? 0 : lim_.max_read - std::min(read_bytes_, lim_.max_read);
}

json ValueDecoder::unread(uint64_t addr) const {
  // Past the budget the memory was not read, not found unreadable.
  if (cut_) return json{{"addr", hexaddr(addr)}, {"truncated", true}};
  return json{{"addr", hexaddr(addr)}, {"unreadable", true}};
}

bool ValueDecoder::is_cut_mark(const json& v) {
  return v.is_object() && v.contains("truncated") &&
         (v.size() == 1 || (v.size() == 2 && v.contains("addr")));
}

ValueDecoder::TInfo ValueDecoder::from_dwarf(TypeId id) {
  TInfo t;
  const GoType* g = env_.types ? env_.types->get(id) : nullptr;
  if (!g) return t;
  t.valid = true;
  t.kind = g->kind;
  t.size = g->size;
  t.name = g->name;
  t.elem = g->elem;
  t.key = g->key;
  t.len = g->count;
  t.duration = t.name == "time.Duration";
  for (const auto& f : g->fields) t.fields.push_back({f.name, f.type, f.offset});
  if (g->runtime_type && env_.rt.types) t.rtype = env_.rt.types + g->runtime_type;
  if (t.kind == GoKind::Interface) {
    t.eface = (!t.fields.empty() && t.fields[0].name == "_type") || t.name == "interface {}" ||
              t.name == "any";
  }
  // Sizes DWARF leaves out for pointer-shaped kinds.
  if (!t.size) {
    switch (t.kind) {
      case GoKind::Ptr:
      case GoKind::Map:
      case GoKind::Chan:
      case GoKind::Func:
      case GoKind::UnsafePointer:
        t.size = 8;
        break;
      case GoKind::String:
      case GoKind::Interface:
        t.size = 16;
        break;
      case GoKind::Slice:
        t.size = 24;
        break;
      default:
        break;
    }
  }
  return t;
}

// Type descriptors are read past the event's budget (they are few, bounded, and cached: a
// descriptor read as invalid because the budget ran out would stay invalid).
ValueDecoder::TInfo ValueDecoder::from_rtype(uint64_t addr) {
  TInfo t;
  auto r = read_rtype(raw_, env_.rt, addr);
  if (!r) return t;
  t.valid = true;
  t.kind = r->kind;
  t.size = r->size;
  t.name = rtype_name(raw_, env_.rt, *r);
  t.duration = t.name == "time.Duration";
  t.rtype = addr;
  if (r->elem) t.elem = r->elem | kRtypeTag;
  if (r->key) t.key = r->key | kRtypeTag;
  t.len = r->len;
  for (const auto& f : r->fields) t.fields.push_back({f.name, f.type | kRtypeTag, f.offset});
  if (t.kind == GoKind::Interface)
    t.eface = env_.rt.gccgo ? r->gccgo_methods == 0 : raw_.u64(addr + 64).value_or(0) == 0;
  return t;
}

const ValueDecoder::TInfo& ValueDecoder::info(uint64_t ref) {
  auto it = cache_.find(ref);
  if (it != cache_.end()) return it->second;
  TInfo t = (ref & kRtypeTag) ? from_rtype(ref & ~kRtypeTag) : from_dwarf(ref);
  return cache_.emplace(ref, std::move(t)).first->second;
}

std::string ValueDecoder::type_name_of_rtype(uint64_t rtype_addr) {
  return info(rtype_addr | kRtypeTag).name;
}

void ValueDecoder::fresh_budget() {
  budget_ = kBudget;
  map_visits_ = kMaxMapVisits;
  nesting_ = 0;
  if (!in_event_) fresh_read_budget();
}

json ValueDecoder::decode(TypeId type, std::span<const uint8_t> bytes) {
  fresh_budget();
  return value(type, bytes.data(), bytes.size(), 0);
}

json ValueDecoder::decode_at(TypeId type, uint64_t addr) {
  fresh_budget();
  return value_at(type, addr, 0);
}

json ValueDecoder::decode_interface(uint64_t w0, uint64_t data, bool eface) {
  fresh_budget();
  return iface_value(w0, data, eface, 0);
}

std::optional<json> ValueDecoder::guess_interface(uint64_t w0, uint64_t w1) {
  const auto& rt = env_.rt;
  if (!rt.types || !rt.etypes || w0 == 0 || rt.gccgo) return std::nullopt;
  auto in_types = [&](uint64_t a) { return a >= rt.types && a < rt.etypes; };
  // An itab starts with the interface type (kind Interface) and then the dynamic type; itabs
  // may themselves lie inside [types, etypes), so test that reading first.
  bool eface = true;
  auto inter = raw_.u64(w0), typ = raw_.u64(w0 + 8);
  if (inter && typ && in_types(*inter) && in_types(*typ)) {
    auto it = read_rtype(raw_, rt, *inter);
    if (it && it->kind == GoKind::Interface) eface = false;
  }
  if (eface && !in_types(w0)) return std::nullopt;
  uint64_t rtype = eface ? w0 : *raw_.u64(w0 + 8);
  const TInfo& t = info(rtype | kRtypeTag);
  if (!t.valid || t.name.empty()) return std::nullopt;
  // A type's name is printable; a guess that reads other bytes as a descriptor is not.
  for (unsigned char c : t.name)
    if (c < 0x20 || c == 0x7f) return std::nullopt;
  fresh_budget();
  return iface_value(w0, w1, eface, 0);
}

json ValueDecoder::decode_param(const ParamLoc& p, const RegState& regs) {
  json out = json::object();
  out["name"] = p.name;
  out["type"] = p.type_name;
  out["value"] = decode_param_value(p, regs);
  return out;
}

json ValueDecoder::decode_param_value(const ParamLoc& p, const RegState& regs) {
  // Where the plan does not know where (part of) a value is, nothing is shown for it; the
  // same for ArgInfo's "more arguments follow" mark ("...", abi.h). A typed value's pieces are
  // the ABI's assignment of its fields, which leaves padding out: a struct passed in
  // registers has fewer piece bytes than its size (hugo's converter.RenderContext). ArgInfo's
  // untyped words have no padding, so there the pieces must add up to the size.
  // info() is valid for a DWARF type exactly when the graph has it, and keeps it at hand.
  fresh_budget();  // the stack slots below are read within the call's budget
  const bool typed = p.type && env_.types && info(p.type).valid;
  const bool located = typed ? !p.loc.pieces.empty() || p.size == 0 : covers(p.loc, p.size);
  if (!located || std::string_view(p.name) == "...")
    return json{{"raw", json::array()}, {"location", "unknown"}};
  auto bytes = assemble_value(p.loc, p.size, regs, mem_);
  if (!bytes) return cut_ ? json{{"truncated", true}} : json{{"unreadable", true}};
  if (typed) return decode(p.type, *bytes);
  json raw = json::array();
  for (size_t off = 0; off < bytes->size(); off += 8)
    raw.push_back(hexaddr(word(bytes->data(), bytes->size(), off)));
  json v = json{{"raw", raw}};
  if (bytes->size() == 16) {
    if (auto iv = guess_interface(word(bytes->data(), 16, 0), word(bytes->data(), 16, 8))) {
      if (iv->is_object())
        for (auto& [k, x] : iv->items()) v[k] = x;
    }
  }
  return v;
}

json ValueDecoder::value_at(uint64_t ref, uint64_t addr, int depth) {
  const TInfo& t = info(ref);
  if (!t.valid) return json{{"addr", hexaddr(addr)}};
  uint64_t size = t.size;
  if (t.kind == GoKind::Array && size > kMaxValueRead) {
    // Read only the elements that will be shown.
    const TInfo& e = info(t.elem);
    if (e.valid && e.size == 1 && (e.kind == GoKind::Uint8 || e.kind == GoKind::Int8)) {
      std::string b(std::min<uint64_t>({uint64_t(t.len), uint64_t(lim_.max_str), bytes_left()}),
                    '\0');
      if (!b.empty() && !mem_.read(addr, b.data(), b.size())) return unread(addr);
      return bytes_value(b, t.len, std::nullopt);
    }
    uint64_t n = std::min<uint64_t>(t.len, lim_.max_elems);
    json arr = json::array();
    for (uint64_t i = 0; i < n && e.size && !cut_; ++i)
      arr.push_back(value_at(t.elem, addr + i * e.size, depth));
    if (static_cast<int64_t>(arr.size()) == t.len) return arr;
    return json{{"len", t.len}, {"elems", std::move(arr)}, {"truncated", true}};
  }
  if (size > kMaxValueRead) return json{{"addr", hexaddr(addr)}};
  std::vector<uint8_t> buf(size);
  if (size && !mem_.read(addr, buf.data(), size)) return unread(addr);
  return value(ref, buf.data(), buf.size(), depth);
}

json ValueDecoder::string_value(uint64_t ptr, int64_t len) {
  if (len < 0) return json{{"str", ""}, {"len", len}, {"truncated", true}};
  // No more than the event's budget allows is allocated, whatever the length claims.
  uint64_t n = std::min<uint64_t>({uint64_t(len), uint64_t(lim_.max_str), bytes_left()});
  std::string s(n, '\0');
  if (n && !mem_.read(ptr, s.data(), n)) {
    if (cut_) return json{{"str", ""}, {"len", len}, {"truncated", true}};
    return json{{"str", ""}, {"len", len}, {"truncated", true}, {"unreadable", true}};
  }
  if (static_cast<uint64_t>(len) > n) {
    // Cut at a character boundary: drop a trailing partial UTF-8 sequence.
    size_t cut = s.size();
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
      unsigned char c = s[s.size() - back];
      if ((c & 0xC0) == 0x80) continue;
      int need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
      if (need > static_cast<int>(back)) cut = s.size() - back;
      break;
    }
    s.resize(cut);
    return json{{"str", std::move(s)}, {"len", len}, {"truncated", true}};
  }
  // The program's bytes as they are: the text view quotes an invalid byte as Go does (\xff),
  // the JSON writers write it as U+00XX (core/model/json_utf8.h).
  return s;
}

json ValueDecoder::slice_value(uint64_t elem, uint64_t ptr, int64_t len, int64_t cap, int depth) {
  const TInfo& be = info(elem);
  if (be.valid && be.size == 1 && (be.kind == GoKind::Uint8 || be.kind == GoKind::Int8)) {
    // Bytes are read like a string's, up to --max-str, and shown as bytes, not numbers.
    uint64_t n =
        len > 0 ? std::min<uint64_t>({uint64_t(len), uint64_t(lim_.max_str), bytes_left()}) : 0;
    std::string b(n, '\0');
    if (n && !mem_.read(ptr, b.data(), n)) b.clear();
    json out = bytes_value(b, len, cap);
    if (n && b.empty() && !cut_) out["unreadable"] = true;
    return out;
  }
  json out = {{"len", len}, {"cap", cap}};
  json elems = json::array();
  const TInfo& e = info(elem);
  int64_t shown = 0;
  if (depth < lim_.max_depth && len > 0 && e.valid) {
    int64_t n = std::min<int64_t>(len, lim_.max_elems);
    if (e.size == 0) {
      for (; shown < n && !cut_; ++shown) elems.push_back(value(elem, nullptr, 0, depth + 1));
    } else if (e.size * n <= kMaxValueRead) {
      std::vector<uint8_t> buf(e.size * n);
      if (mem_.read(ptr, buf.data(), buf.size()))
        for (; shown < n && budget_ > 0 && !cut_; ++shown)
          elems.push_back(value(elem, buf.data() + shown * e.size, e.size, depth + 1));
    } else {
      for (; shown < n && budget_ > 0 && !cut_; ++shown)
        elems.push_back(value_at(elem, ptr + shown * e.size, depth + 1));
    }
  }
  out["elems"] = std::move(elems);
  if (shown < len) out["truncated"] = true;
  return out;
}

json ValueDecoder::bytes_value(std::string_view read, int64_t len, std::optional<int64_t> cap) {
  json out = {{"len", len}};
  if (cap) out["cap"] = *cap;
  std::string hex;
  hex.reserve(read.size() * 2);
  for (unsigned char c : read) hex += fmt::format("{:02x}", c);
  out["bytes"] = std::move(hex);
  if (static_cast<int64_t>(read.size()) < len) out["truncated"] = true;
  return out;
}

void ValueDecoder::add_time(json& obj, const uint8_t* p, size_t n) {
  if (n < 24) return;
  // time.Time is {wall uint64; ext int64; loc *Location} in every Go release gotap reads.
  GoInstant in = go_instant(word(p, n, 0), static_cast<int64_t>(word(p, n, 8)));
  uint64_t loc = word(p, n, 16);
  int64_t offset = 0;
  std::string zone = "UTC";
  bool known = loc == 0;  // nil is UTC
  if (!known) {
    // Location: name string, zone []zone, tx []zoneTrans, extend string, cacheStart,
    // cacheEnd int64, cacheZone *zone; zone: name string, offset int, isDST bool. Go's
    // lookup uses the cached zone when the instant is inside its range, and a location
    // without zones is UTC; other cases need the transition table, left unread here.
    uint64_t l[13];
    if (mem_.read(loc, l, sizeof l)) {
      int64_t nzones = static_cast<int64_t>(l[3]);
      uint64_t zaddr = 0;
      auto cstart = static_cast<int64_t>(l[10]), cend = static_cast<int64_t>(l[11]);
      if (nzones == 0) {
        known = true;
      } else if (l[12] && cstart <= in.unix_sec && in.unix_sec < cend) {
        zaddr = l[12];
      } else if (nzones == 1) {
        zaddr = l[2];
      }
      uint64_t z[3];
      if (zaddr && mem_.read(zaddr, z, sizeof z) && z[1] <= 16) {
        std::string name(z[1], '\0');
        if (mem_.read(z[0], name.data(), name.size())) {
          zone = sanitize_utf8(name);
          offset = static_cast<int64_t>(z[2]);
          known = true;
        }
      }
    }
  }
  if (!known) {
    offset = 0;
    zone = "UTC";
    obj["time_location_unread"] = true;
  }
  // Words that are no instant (a torn read, not a real Time) get no reading, only fields.
  std::string text = format_go_time(in, offset, zone);
  if (text.empty()) {
    obj.erase("time_location_unread");
    return;
  }
  obj["time"] = std::move(text);
}

json ValueDecoder::chan_value(uint64_t hchan) {
  json out = {{"addr", hexaddr(hchan)}};
  uint64_t w[2];
  if (mem_.read(hchan, w, sizeof w)) {
    out["len"] = w[0];
    out["cap"] = w[1];
  }
  return out;
}

json ValueDecoder::func_value(uint64_t funcval) {
  uint64_t fn = mem_.u64(funcval).value_or(0);
  json out = {{"addr", hexaddr(fn ? fn : funcval)}};
  if (fn && env_.func_name) {
    std::string name = env_.func_name(fn);
    if (!name.empty()) out["func"] = name;
  }
  return out;
}

json ValueDecoder::iface_value(uint64_t w0, uint64_t data, bool eface, int depth) {
  if (w0 == 0) return nullptr;
  // Its type descriptor is read past the byte budget (from_rtype), not past the clock.
  if (!within_budget()) return json{{"truncated", true}};
  uint64_t rtype = eface ? w0 : raw_.u64(w0 + itab_type_off()).value_or(0);
  if (!rtype) return json{{"type", ""}, {"raw", {hexaddr(w0), hexaddr(data)}}};
  uint64_t ref = rtype | kRtypeTag;
  // With DWARF, the dynamic type's DIE gives the same layout; descriptors work stripped too.
  const TInfo& t = info(ref);
  json out = {{"type", t.name}};
  if (!t.valid) {
    out["raw"] = {hexaddr(w0), hexaddr(data)};
    return out;
  }
  auto r = read_rtype(raw_, env_.rt, rtype);
  bool direct = r && r->direct_iface;
  if (direct) {
    uint8_t b[8];
    std::memcpy(b, &data, 8);
    out["value"] = value(ref, b, std::min<uint64_t>(t.size, 8), depth);
  } else if (data == 0) {
    out["value"] = nullptr;
  } else {
    out["value"] = value_at(ref, data, depth);
  }
  // The message too, whatever --max-depth left of the value: it is what a user looks for.
  if (has_error_text(t.name))
    if (auto text = error_text(rtype, data, 0)) out["error"] = std::move(*text);
  return out;
}

bool ValueDecoder::map_slots(const TInfo& t, uint64_t h,
                             const std::function<bool(uint64_t, uint64_t)>& each) {
  std::optional<RType> r;
  if (t.rtype) r = read_rtype(raw_, env_.rt, t.rtype);
  const TInfo& k = info(t.key);
  const TInfo& v = info(t.elem);
  bool swiss = env_.rt.swiss_maps;
  // Layout: from the map's descriptor, else derived from the key and value types.
  uint64_t ks = k.size, vs = v.size;
  bool ind_k = ks > 128, ind_v = vs > 128;
  uint64_t keys_off = 8, key_stride = 0, elems_off = 0, elem_stride = 0, group = 0, bucket = 0;
  if (swiss) {
    if (r && r->key_stride) {
      keys_off = r->keys_off;
      key_stride = r->key_stride;
      elems_off = r->elems_off;
      elem_stride = r->elem_stride;
      group = r->group_size;
      ind_k = r->map_flags & 4;
      ind_v = r->map_flags & 8;
    } else {
      uint64_t kss = ind_k ? 8 : ks, vss = ind_v ? 8 : vs;
      uint64_t va = ind_v ? 8 : (env_.types ? env_.types->align_of(t.elem) : 8);
      uint64_t ka = ind_k ? 8 : (env_.types ? env_.types->align_of(t.key) : 8);
      // Interleaved slots after the 8-byte ctrl word (every release's default layout).
      uint64_t elem_off = align_up(kss, va);
      uint64_t slot = align_up(elem_off + vss, std::max(ka, va));
      key_stride = elem_stride = slot;
      elems_off = keys_off + elem_off;
      group = 8 + 8 * slot;
    }
  } else {
    if (r && r->bucket_size) {
      ks = r->key_size;
      vs = r->value_size;
      bucket = r->bucket_size;
      ind_k = r->map_flags & 1;
      ind_v = r->map_flags & 2;
    } else {
      if (ind_k) ks = 8;
      if (ind_v) vs = 8;
      bucket = align_up(8 + 8 * ks + 8 * vs, 8) + 8;
    }
  }
  uint8_t hdr[40];
  if (!mem_.read(h, hdr, sizeof hdr)) return false;
  // The live entries the header counts: the walk ends once it found them all, in a sparse
  // map long before its last empty group.
  const uint64_t count = word(hdr, sizeof hdr, 0);
  uint64_t found = 0;
  bool more = count > 0;
  auto slot = [&](uint64_t kaddr, uint64_t vaddr) {
    if (ind_k) kaddr = mem_.u64(kaddr).value_or(0);
    if (ind_v) vaddr = mem_.u64(vaddr).value_or(0);
    more = each(kaddr, vaddr) && ++found < count;
  };
  // Groups or buckets this walk may still visit: up to `want` of them, taken now.
  uint64_t visited = 0;
  auto take = [&](uint64_t want) {
    const uint64_t k = std::min(
        {want, kMaxMapGroups - visited, static_cast<uint64_t>(std::max<int64_t>(map_visits_, 0))});
    visited += k;
    map_visits_ -= static_cast<int64_t>(k);
    return k;
  };
  std::vector<uint64_t> addrs, words;
  // The first word of each of `k` groups or buckets `stride` apart from `base`, in one batch;
  // how many were read.
  std::vector<uint8_t> chunk;
  auto first_words = [&](uint64_t base, uint64_t first, uint64_t k, uint64_t stride) -> size_t {
    addrs.resize(k);
    words.resize(k);
    for (uint64_t j = 0; j < k; ++j) addrs[j] = base + (first + j) * stride;
    if (stride > kDenseStride) return mem_.read_words(addrs.data(), words.data(), k);
    // Close together: whole runs of groups or buckets, a chunk a read. A process_vm_readv
    // element costs about what 2 KB of a contiguous read does (measured: 1.3 us a word).
    const uint64_t per = std::max<uint64_t>(1, kChunkBytes / stride);
    size_t got = 0;
    for (uint64_t j = 0; j < k; j += per) {
      const uint64_t n = std::min(per, k - j);
      chunk.resize((n - 1) * stride + 8);
      if (!mem_.read(addrs[j], chunk.data(), chunk.size())) return got;
      for (uint64_t i = 0; i < n; ++i) std::memcpy(&words[j + i], &chunk[i * stride], 8);
      got += n;
    }
    return got;
  };
  if (swiss) {
    uint64_t dir = word(hdr, sizeof hdr, 16);
    int64_t dirlen = static_cast<int64_t>(word(hdr, sizeof hdr, 24));
    struct Table {
      uint64_t data, groups, used;
    };
    std::vector<Table> tables;
    if (dirlen == 0) {
      if (dir) tables.push_back({dir, 1, count});
    } else if (dirlen > 0 && dirlen <= (1 << 16)) {
      std::vector<uint64_t> dirs(dirlen);
      if (mem_.read(dir, dirs.data(), dirlen * 8)) {
        // A table's `used` first, the 32 bytes of every table's header in batches: a map grown
        // large and emptied keeps its thousands of tables, and only those with entries are
        // walked. table: used uint16 @0, groups.data @16, groups.lengthMask @24.
        std::unordered_set<uint64_t> seen;
        std::vector<uint64_t> ta, tw;
        for (uint64_t tb : dirs)
          if (tb && seen.insert(tb).second) ta.push_back(tb);
        tw.resize(4 * ta.size());
        const size_t got = mem_.read_blocks(ta.data(), 32, tw.data(), ta.size());
        for (size_t i = 0; i < got; ++i)
          if (uint64_t used = tw[4 * i] & 0xFFFF)
            tables.push_back({tw[4 * i + 2], tw[4 * i + 3] + 1, used});
      }
    }
    for (const Table& tb : tables) {
      // Control words a batch at a time, and then only the full slots (ctrl high bit clear).
      uint64_t in_table = 0;
      for (uint64_t gi = 0; gi < tb.groups && more && in_table < tb.used;) {
        const uint64_t k = take(std::min<uint64_t>(kWordBatch, tb.groups - gi));
        if (!k) {
          more = false;
          break;
        }
        const size_t got = first_words(tb.data, gi, k, group);
        for (size_t j = 0; j < got && more && in_table < tb.used; ++j) {
          const uint64_t ga = addrs[j], ctrl = words[j];
          for (int i = 0; i < 8 && more; ++i) {
            if ((ctrl >> (8 * i)) & 0x80) continue;
            ++in_table;
            slot(ga + keys_off + i * key_stride, ga + elems_off + i * elem_stride);
          }
        }
        if (got < k) break;
        gi += k;
      }
      if (!more) break;
    }
  } else {
    uint8_t flags = hdr[8], b = hdr[9];
    uint64_t buckets = word(hdr, sizeof hdr, 16), old = word(hdr, sizeof hdr, 24);
    auto walk = [&](uint64_t base, uint64_t nb, bool is_old) {
      // B comes from the program's memory: up to 2^31 buckets, bounded by the visits and the
      // event's budget. The tophash words of a batch of buckets come first: a bucket whose
      // first cell is emptyRest (0) holds nothing, nor does its overflow chain, and is not
      // read further (a map grown large and emptied is mostly such buckets).
      for (uint64_t bi = 0; bi < nb && more;) {
        const uint64_t k = take(std::min<uint64_t>(kWordBatch, nb - bi));
        if (!k) break;
        const size_t got = first_words(base, bi, k, bucket);
        for (size_t j = 0; j < got && more; ++j) {
          uint64_t ba = addrs[j], top = words[j];
          const uint8_t top0 = top & 0xFF;
          if (top0 == 0) continue;                         // emptyRest
          if (is_old && top0 >= 2 && top0 <= 4) continue;  // evacuated
          for (int chain = 0; ba && chain < 1024 && more; ++chain) {
            if (chain > 0) {
              if (!take(1)) {
                more = false;
                break;
              }
              auto t8 = mem_.u64(ba);
              if (!t8) break;
              top = *t8;
            }
            for (int i = 0; i < 8 && more; ++i) {
              if (((top >> (8 * i)) & 0xFF) < 5) continue;
              slot(ba + 8 + i * ks, ba + 8 + 8 * ks + i * vs);
            }
            ba = more ? mem_.u64(ba + bucket - 8).value_or(0) : 0;
          }
        }
        if (got < k) break;
        bi += k;
      }
    };
    if (b < 32 && buckets) walk(buckets, uint64_t(1) << b, false);
    if (old && b < 32 && b > 0)
      walk(old, (flags & 8) ? uint64_t(1) << b : uint64_t(1) << (b - 1), true);
    if (old && b == 0 && (flags & 8)) walk(old, 1, true);
  }
  return true;
}

json ValueDecoder::map_value(const TInfo& t, uint64_t h, int depth) {
  json out = json::object();
  uint8_t hdr[40];
  if (!mem_.read(h, hdr, sizeof hdr)) return unread(h);
  const uint64_t count = word(hdr, sizeof hdr, 0);
  out["len"] = count;
  json entries = json::array();
  auto full = [&]() {
    return entries.size() >= static_cast<size_t>(lim_.max_elems) || budget_ <= 0 || cut_;
  };
  if (depth < lim_.max_depth && info(t.key).valid && info(t.elem).valid) {
    map_slots(t, h, [&](uint64_t kaddr, uint64_t vaddr) {
      if (full()) return false;
      entries.push_back(
          json::array({value_at(t.key, kaddr, depth + 1), value_at(t.elem, vaddr, depth + 1)}));
      return !full();
    });
  }
  out["entries"] = std::move(entries);
  if (out["entries"].size() < count) out["truncated"] = true;
  return out;
}

std::optional<uint64_t> ValueDecoder::map_find(TypeId map_type, uint64_t h, bool string_key,
                                               std::string_view key) {
  const TInfo& t = info(map_type);
  if (!t.valid || t.kind != GoKind::Map || !info(t.key).valid) return std::nullopt;
  std::optional<uint64_t> found;
  std::string buf;
  fresh_budget();
  map_visits_ = kMaxMapGroups;  // a lookup is a call of its own, of one map
  map_slots(t, h, [&](uint64_t kaddr, uint64_t vaddr) {
    if (string_key) {
      uint64_t hdr[2];
      if (!mem_.read(kaddr, hdr, sizeof hdr) || hdr[1] != key.size()) return true;
      buf.resize(key.size());
      if (!key.empty() && !mem_.read(hdr[0], buf.data(), key.size())) return true;
    } else {
      buf.resize(key.size());
      if (!mem_.read(kaddr, buf.data(), key.size())) return true;
    }
    if (buf != key) return true;
    found = vaddr;
    return false;
  });
  return found;
}

json ValueDecoder::value(uint64_t ref, const uint8_t* p, size_t n, int depth) {
  --budget_;
  // Whatever the types and the memory say (a list 100,000 nodes deep, a type that contains
  // itself in a hostile binary's DWARF), a value is cut before the stack runs out.
  if (!may_nest()) return json{{"truncated", true}};
  struct Nest {
    int& n;
    explicit Nest(int& x) : n(++x) {}
    ~Nest() { --n; }
  } nest(nesting_);
  const TInfo& t = info(ref);
  if (!t.valid) {
    json raw = json::array();
    for (size_t off = 0; off < n; off += 8) raw.push_back(hexaddr(word(p, n, off)));
    return json{{"raw", raw}};
  }
  auto sint = [&](size_t sz) -> int64_t {
    uint64_t u = word(p, n, 0);
    if (sz < 8) {
      u &= (uint64_t(1) << (sz * 8)) - 1;
      if (u >> (sz * 8 - 1)) u |= ~((uint64_t(1) << (sz * 8)) - 1);
    }
    return static_cast<int64_t>(u);
  };
  auto uint_ = [&](size_t sz) -> uint64_t {
    uint64_t u = word(p, n, 0);
    return sz < 8 ? u & ((uint64_t(1) << (sz * 8)) - 1) : u;
  };
  auto f32 = [&](size_t off) {
    float f = 0;
    if (off + 4 <= n) std::memcpy(&f, p + off, 4);
    return f;
  };
  auto f64 = [&](size_t off) {
    double d = 0;
    if (off + 8 <= n) std::memcpy(&d, p + off, 8);
    return d;
  };
  switch (t.kind) {
    case GoKind::Bool:
      return n > 0 && p[0] != 0;
    case GoKind::Int8:
      return sint(1);
    case GoKind::Int16:
      return sint(2);
    case GoKind::Int32:
      return sint(4);
    case GoKind::Int:
    case GoKind::Int64:
      if (t.duration) return json{{"duration", format_go_duration(sint(8))}, {"ns", sint(8)}};
      return sint(8);
    case GoKind::Uint8:
      return uint_(1);
    case GoKind::Uint16:
      return uint_(2);
    case GoKind::Uint32:
      return uint_(4);
    case GoKind::Uint:
    case GoKind::Uint64:
    case GoKind::Uintptr:
      return uint_(8);
    case GoKind::Float32:
      return f32(0);
    case GoKind::Float64:
      return f64(0);
    case GoKind::Complex64:
      return json{{"real", f32(0)}, {"imag", f32(4)}};
    case GoKind::Complex128:
      return json{{"real", f64(0)}, {"imag", f64(8)}};
    case GoKind::String:
      return string_value(word(p, n, 0), static_cast<int64_t>(word(p, n, 8)));
    case GoKind::Slice: {
      uint64_t ptr = word(p, n, 0);
      if (ptr == 0) return nullptr;
      uint64_t elem = t.elem;
      if (!elem && !t.fields.empty()) {
        // DWARF slices name their element through the array field's pointer type.
        const TInfo& arr = info(t.fields[0].type);
        elem = arr.elem;
      }
      return slice_value(elem, ptr, static_cast<int64_t>(word(p, n, 8)),
                         static_cast<int64_t>(word(p, n, 16)), depth);
    }
    case GoKind::Array: {
      const TInfo& e = info(t.elem);
      if (e.valid && e.size == 1 && (e.kind == GoKind::Uint8 || e.kind == GoKind::Int8))
        return bytes_value(
            std::string_view(reinterpret_cast<const char*>(p),
                             std::min<size_t>({n, size_t(t.len), size_t(lim_.max_str)})),
            t.len, std::nullopt);
      json arr = json::array();
      int64_t shown = std::min<int64_t>(t.len, lim_.max_elems);
      for (int64_t i = 0; i < shown && e.valid && budget_ > 0 && !cut_; ++i) {
        uint64_t off = i * e.size;
        if (off > n || e.size > n - off) break;
        arr.push_back(value(t.elem, p + off, e.size, depth));
      }
      // A whole array is a plain list; one cut short says so, as a slice does.
      if (static_cast<int64_t>(arr.size()) == t.len) return arr;
      return json{{"len", t.len}, {"elems", std::move(arr)}, {"truncated", true}};
    }
    case GoKind::Struct: {
      // Names are data in an array, never keys: a field called "addr" or "raw" cannot be
      // taken for one of gotap's marks, and the array keeps declaration order.
      json fields = json::array();
      for (const auto& f : t.fields) {
        const TInfo& ft = info(f.type);
        uint64_t sz = ft.size;
        json fv = (f.offset > n || sz > n - f.offset) ? json{{"unreadable", true}}
                                                      : value(f.type, p + f.offset, sz, depth);
        fields.push_back(json{{"name", f.name}, {"value", std::move(fv)}});
      }
      json obj = {{"fields", std::move(fields)}};
      if (t.name == "time.Time") add_time(obj, p, n);
      return obj;
    }
    case GoKind::Ptr: {
      uint64_t a = word(p, n, 0);
      if (a == 0) return nullptr;
      json out = {{"addr", hexaddr(a)}};
      const TInfo& e = info(t.elem);
      if (depth >= lim_.max_depth || !e.valid || budget_ <= 0 || cut_) {
        if (cut_) out["truncated"] = true;
        return out;
      }
      json v = value_at(t.elem, a, depth + 1);
      if (v.is_object() && v.contains("unreadable")) return out;
      if (is_cut_mark(v)) {
        out["truncated"] = true;  // the pointee is past the budget: as --max-line drops it
        return out;
      }
      out["elem"] = std::move(v);
      return out;
    }
    case GoKind::UnsafePointer: {
      uint64_t a = word(p, n, 0);
      if (a == 0) return nullptr;
      return json{{"addr", hexaddr(a)}};
    }
    case GoKind::Map: {
      uint64_t a = word(p, n, 0);
      if (a == 0) return nullptr;
      return map_value(t, a, depth);
    }
    case GoKind::Chan: {
      uint64_t a = word(p, n, 0);
      if (a == 0) return nullptr;
      return chan_value(a);
    }
    case GoKind::Func: {
      uint64_t a = word(p, n, 0);
      if (a == 0) return nullptr;
      return func_value(a);
    }
    case GoKind::Interface:
      return iface_value(word(p, n, 0), word(p, n, 8), t.eface, depth);
    default: {
      json raw = json::array();
      for (size_t off = 0; off < n; off += 8) raw.push_back(hexaddr(word(p, n, off)));
      return json{{"raw", raw}};
    }
  }
}

}  // namespace gotap
