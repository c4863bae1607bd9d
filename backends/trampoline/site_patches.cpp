#include "backends/trampoline/site_patches.h"

#include <cstring>
#include <optional>

#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {

namespace {

constexpr uint8_t kInt3 = 0xcc;

}  // namespace

Result<std::vector<uint8_t>> build_trampolines(const PatchSet& set, const Region& region,
                                               uint64_t bias, uint64_t code, const Owner& owner,
                                               std::vector<LiveSite>& sites, bool empty) {
  std::vector<uint8_t> out(region.code_size(), kInt3);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  static_assert(sizeof kMagic <= kOwnerOffset && kOwnerOffset + sizeof(Owner) <= kHeaderSize);
  std::memcpy(out.data() + kOwnerOffset, &owner, sizeof owner);
  const uint64_t counters = code + region.code_size();
  sites.clear();
  sites.reserve(region.patches.size());
  for (size_t k = 0; k < region.patches.size(); ++k) {
    const Patch& p = set.patches[region.patches[k]];
    JumpSite s = p.site;
    s.at += bias;
    s.branch_to += bias;
    const uint64_t slot = code + kHeaderSize + k * kSlotSize;
    auto t = count_trampoline(slot, s, Bytes(p.orig.data(), s.len), counters + k * kCounterStride,
                              false);
    if (!t) return t.error();
    if (t->size() > kSlotSize) return make_error("a trampoline of {} bytes", t->size());
    if (empty) {
      // After the compare and the relocated jbe (6 bytes): the 8-byte lock inc.
      const size_t inc = s.len - s.branch_len + 6;
      static constexpr uint8_t kNop8[] = {0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00};
      if (!s.branch_len || inc + sizeof kNop8 > t->size() || (*t)[inc] != 0xf0)
        return make_error("no count to take out of the trampoline at {:#x}", slot);
      std::memcpy(t->data() + inc, kNop8, sizeof kNop8);
    }
    std::memcpy(out.data() + kHeaderSize + k * kSlotSize, t->data(), t->size());
    auto j = p.short_check ? short_site_jump(s, slot) : site_jump(s, slot);
    if (!j) return j.error();
    LiveSite l = live_site(p, bias);
    if (j->size() != l.len) return make_error("a jump of {} bytes at {:#x}", j->size(), l.at);
    std::memcpy(l.jump.data(), j->data(), j->size());
    sites.push_back(l);
  }
  return out;
}

std::optional<uint64_t> left_jump(const LiveSite& s, const uint8_t* now) {
  if (now[0] != 0xe9) return std::nullopt;
  if (s.len == s.check_len ? now[5] != kInt3
                           : std::memcmp(now + s.len, s.orig.data() + s.len, s.check_len - s.len))
    return std::nullopt;
  int32_t rel = 0;
  std::memcpy(&rel, now + 1, 4);
  return s.at + 5 + static_cast<int64_t>(rel);
}

LiveSite live_site(const Patch& p, uint64_t bias) {
  LiveSite l;
  l.at = p.site.at + bias;
  l.len = p.short_check ? kJumpLen - 1 : p.site.len;
  l.check_len = p.site.len;
  l.orig = p.orig;
  return l;
}

SiteNow site_now(ptrace::TraceeMemory& mem, const LiveSite& s, const IsOurs& ours) {
  uint8_t now[16];
  if (!mem.read(s.at, now, s.check_len)) return SiteNow::Unreadable;
  if (std::memcmp(now, s.orig.data(), s.check_len) == 0) return SiteNow::File;
  const auto to = ours ? left_jump(s, now) : std::nullopt;
  return to && ours(*to) ? SiteNow::Ours : SiteNow::Foreign;
}

WriteTally write_jumps(ptrace::TraceeMemory& mem, std::vector<LiveSite>& sites,
                       const IsOurs& ours) {
  WriteTally t;
  for (LiveSite& s : sites) {
    if (s.written) continue;
    switch (site_now(mem, s, ours)) {
      case SiteNow::Unreadable:
        ++t.failed;
        continue;
      case SiteNow::Foreign:
        ++t.foreign;
        continue;
      case SiteNow::Ours:
        ++t.replaced;
        break;
      case SiteNow::File:
        break;
    }
    if (!mem.write(s.at, s.jump.data(), s.len)) {
      ++t.failed;
      continue;
    }
    s.written = true;
    ++t.written;
  }
  return t;
}

WriteTally restore_jumps(ptrace::TraceeMemory& mem, std::vector<LiveSite>& sites) {
  WriteTally t;
  for (LiveSite& s : sites) {
    if (!s.written) continue;
    uint8_t now[16];
    if (!mem.read(s.at, now, s.len)) {
      ++t.failed;
      continue;
    }
    // The first byte may be a uprobe's int3 now: the rest goes back under it.
    const size_t from = now[0] == kInt3 && s.jump[0] != kInt3 ? 1 : 0;
    t.taken += from;
    if (std::memcmp(now + from, s.jump.data() + from, s.len - from) != 0) {
      ++t.foreign;
      s.written = false;
      continue;
    }
    if (!mem.write(s.at + from, s.orig.data() + from, s.len - from)) {
      ++t.failed;
      continue;
    }
    s.written = false;
    ++t.written;
  }
  return t;
}

}  // namespace gotap::trampoline
