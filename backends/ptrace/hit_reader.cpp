#include "backends/ptrace/hit_reader.h"

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

namespace gotap::ptrace {

bool HitMemory::read(uint64_t addr, void* buf, size_t n) {
  if (n == 0) return true;
  for (const auto& rg : regions_)
    if (addr >= rg.addr && addr - rg.addr <= rg.bytes.size() &&
        n <= rg.bytes.size() - (addr - rg.addr)) {
      std::memcpy(buf, rg.bytes.data() + (addr - rg.addr), n);
      return true;
    }
  if (!live_ok_) {
    ++misses_;
    return false;
  }
  ++syscalls_;
  return live_.read(addr, buf, n);
}

size_t HitMemory::read_blocks(const uint64_t* addrs, size_t size, void* out, size_t n) {
  if (!live_ok_) return MemoryReader::read_blocks(addrs, size, out, n);
  syscalls_ += (n + 1023) / 1024;
  return live_.read_blocks(addrs, size, out, n);
}

void HitMemory::copy(const std::vector<Range>& ranges) {
  clear();
  copy_more(ranges);
}

void HitMemory::copy_more(const std::vector<Range>& ranges) {
  // process_vm_readv takes at most IOV_MAX iovecs; a hit plans a handful.
  constexpr size_t kMax = 64;
  size_t first = regions_.size();
  std::array<iovec, kMax> local{}, remote{};
  size_t k = 0;
  for (const auto& rg : ranges) {
    if (!rg.size || rg.addr + rg.size < rg.addr) continue;
    if (k == kMax) {
      complete_ = false;
      continue;
    }
    regions_.push_back({rg.addr, std::vector<uint8_t>(rg.size)});
    local[k] = {regions_.back().bytes.data(), rg.size};
    remote[k] = {reinterpret_cast<void*>(rg.addr), rg.size};
    ++k;
  }
  if (!k) return;
  ++syscalls_;
  ssize_t got = process_vm_readv(live_.pid(), local.data(), k, remote.data(), k, 0);
  if (got < 0) got = 0;
  // The read stops at the first range it cannot read whole: that one and the ones after it
  // are read alone (live_.read also tries /proc/PID/mem); a range unreadable even so goes.
  size_t i = 0;
  for (uint64_t left = uint64_t(got); i < k && left >= local[i].iov_len; ++i)
    left -= local[i].iov_len;
  std::vector<Region> kept(std::make_move_iterator(regions_.begin() + first),
                           std::make_move_iterator(regions_.begin() + first + i));
  for (size_t j = i; j < k; ++j) {
    Region& rg = regions_[first + j];
    ++syscalls_;
    if (live_.read(rg.addr, rg.bytes.data(), rg.bytes.size())) kept.push_back(std::move(rg));
  }
  regions_.resize(first);
  for (auto& rg : kept) regions_.push_back(std::move(rg));
}

namespace {

// Types whose value is its bytes alone, or a string (its bytes are planned).
bool scalar_type(std::string_view t) {
  static constexpr std::string_view kNames[] = {
      "int",    "int8",   "int16",  "int32",     "int64",      "uint",    "uint8",
      "uint16", "uint32", "uint64", "uintptr",   "bool",       "float32", "float64",
      "byte",   "rune",   "string", "complex64", "complex128",
  };
  return std::find(std::begin(kNames), std::end(kNames), t) != std::end(kNames);
}

}  // namespace

HitPlan plan_hit(const std::vector<ParamLoc>& params) {
  HitPlan hp;
  for (const auto& p : params) {
    for (const auto& pc : p.loc.pieces) {
      // Not in the copy (a gccgo result in the caller's buffer): read live while stopped.
      if (pc.kind == LocPiece::RegMem) hp.copyable = false;
      if (pc.kind != LocPiece::Stack || !pc.size) continue;
      const int64_t lo = pc.stack_offset, hi = pc.stack_offset + int64_t(pc.size);
      hp.stack_lo = hp.has_stack ? std::min(hp.stack_lo, lo) : lo;
      hp.stack_hi = hp.has_stack ? std::max(hp.stack_hi, hi) : hi;
      hp.has_stack = true;
    }
    // Untyped words are guessed at (an interface?), which reads type descriptors.
    if (!p.type || !scalar_type(p.type_name)) hp.copyable = false;
    if (p.type && p.type_name == "string" && p.size == 16) hp.strs.push_back({&p});
  }
  // A frame's arguments span a few hundred bytes at most; a wider span is not copied whole.
  if (hp.has_stack && hp.stack_hi - hp.stack_lo > 4096) {
    hp.has_stack = false;
    hp.copyable = false;
  }
  return hp;
}

HitReader::HitReader(TraceeMemory& live, const ProbePlan& plan, uint32_t max_str, bool values)
    : plan_(plan), mem_(live), max_str_(max_str) {
  const RuntimeOffsets& o = plan.offsets;
  g_end_ = std::max({o.g_goid + 8, o.g_stack_hi + 8, o.g_stack_lo + 8});
  if (g_end_ > 512) g_end_ = 0;
  if (!values) return;
  args_.reserve(plan.funcs.size());
  results_.reserve(plan.funcs.size());
  for (const auto& f : plan.funcs) {
    args_.push_back(plan_hit(f.args));
    results_.push_back(plan_hit(f.results));
  }
}

bool HitReader::copyable(int func, bool results) const {
  if (func < 0 || size_t(func) >= args_.size()) return false;
  return (results ? results_ : args_)[func].copyable;
}

void HitReader::gather(const Site& s, const user_regs_struct& r) {
  ++hits_;
  ranges_.clear();
  const uint64_t sp = r.rsp + s.sp_delta;
  const unsigned long long* gp[kNumValueRegs] = {&r.rax, &r.rbx, &r.rcx, &r.rdi, &r.rsi,
                                                 &r.r8,  &r.r9,  &r.r10, &r.r11, &r.rdx};
  // A string's pointer or length word: from its register, or from the stack's copy (second
  // pass); nullopt while unknown.
  auto word = [&](const ParamLoc& p, uint32_t off, bool from_copy) -> std::optional<uint64_t> {
    for (const auto& pc : p.loc.pieces) {
      if (off < pc.value_offset || off + 8 > pc.value_offset + pc.size) continue;
      if (pc.kind == LocPiece::IntReg && pc.reg < kNumValueRegs && pc.value_offset == off &&
          pc.reg_byte == 0)
        return uint64_t(*gp[pc.reg]);
      if (pc.kind == LocPiece::Stack && from_copy) {
        uint64_t v = 0;
        if (mem_.read(sp + pc.stack_offset + (off - pc.value_offset), &v, 8)) return v;
      }
      return std::nullopt;
    }
    return std::nullopt;
  };
  // Second pass: only the strings the first could not place.
  auto add_strs = [&](const HitPlan& hp, bool from_copy) {
    for (const auto& st : hp.strs) {
      if (from_copy && word(*st.p, 0, false) && word(*st.p, 8, false)) continue;
      auto ptr = word(*st.p, 0, from_copy), len = word(*st.p, 8, from_copy);
      if (!ptr || !len || !*ptr || int64_t(*len) <= 0) continue;
      ranges_.push_back({*ptr, uint32_t(std::min<uint64_t>(*len, max_str_))});
    }
  };
  bool g_done = false, second = false;
  std::vector<const HitPlan*> plans;
  for (const auto& role : s.roles) {
    if (role.func < 0 || size_t(role.func) >= plan_.funcs.size()) continue;
    if (!g_done && g_end_ && r.r14 && plan_.funcs[role.func].abi != "abi0") {
      ranges_.push_back({r.r14, g_end_});
      g_done = true;
    }
    if (size_t(role.func) >= args_.size()) continue;  // no values read
    const HitPlan* hp = nullptr;
    if (role.kind == SiteRole::Entry) hp = &args_[role.func];
    if (role.kind == SiteRole::Return) hp = &results_[role.func];
    if (!hp) continue;
    if (hp->has_stack)
      ranges_.push_back({sp + hp->stack_lo, uint32_t(hp->stack_hi - hp->stack_lo)});
    add_strs(*hp, false);
    plans.push_back(hp);
    second = second || (hp->has_stack && !hp->strs.empty());
  }
  mem_.set_live(true);
  mem_.copy(ranges_);
  if (!second) return;
  // Strings whose headers are on the stack (ABI0): a second copy, from the first one.
  ranges_.clear();
  for (const HitPlan* hp : plans) add_strs(*hp, true);
  mem_.copy_more(ranges_);
}

}  // namespace gotap::ptrace
