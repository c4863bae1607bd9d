#include "backends/trampoline/site_patches.h"

#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/plan/trampoline_code.h"

namespace gotap::trampoline {

namespace {

constexpr uint8_t kInt3 = 0xcc;
constexpr uint64_t kPage = 4096;

RegionCode header_only(const Region& region, const Owner& owner) {
  RegionCode out;
  out.bytes.assign(region.code_size(), kInt3);
  std::memcpy(out.bytes.data(), kMagic, sizeof kMagic);
  static_assert(sizeof kMagic <= kOwnerOffset && kOwnerOffset + sizeof(Owner) <= kHeaderSize);
  std::memcpy(out.bytes.data() + kOwnerOffset, &owner, sizeof owner);
  return out;
}

// The pages to write: those `used` marks, merged into runs.
void runs_of(const std::vector<bool>& used, RegionCode& out) {
  for (size_t pg = 0; pg < used.size(); ++pg) {
    if (!used[pg]) continue;
    if (!out.runs.empty() && out.runs.back().first + out.runs.back().second == pg * kPage)
      out.runs.back().second += kPage;
    else
      out.runs.emplace_back(pg * kPage, kPage);
  }
}

}  // namespace

Result<RegionCode> build_timed(const PatchSet& set, const Region& region, uint64_t bias,
                               uint64_t code, const Owner& owner, const TimedCode& timed,
                               std::vector<LiveSite>& sites) {
  RegionCode out = header_only(region, owner);
  std::vector<bool> used(region.code_size() / kPage);
  used[0] = true;
  auto put = [&](uint64_t off, const std::vector<uint8_t>& b) -> Result<void> {
    if (off < kHeaderSize || off + b.size() > region.code_size())
      return make_error("trampoline code at {:#x} outside its region", code + off);
    std::memcpy(out.bytes.data() + off, b.data(), b.size());
    used[off / kPage] = used[(off + b.size() - 1) / kPage] = true;
    return {};
  };
  sites.clear();
  for (size_t k = 0; k < region.patches.size(); ++k) {
    const size_t idx = region.patches[k];
    const Patch& p = set.patches[idx];
    JumpSite s = p.site;
    s.at += bias;
    s.branch_to += bias;
    const Bytes orig(p.orig.data(), s.len);
    const uint32_t id = static_cast<uint32_t>(idx << 1 | (p.ret ? 1 : 0));
    const uint64_t slot = code + region.at[k];
    LiveSite l = live_site(p, bias);
    Result<std::vector<uint8_t>> jump = std::vector<uint8_t>{};
    if (!region.ring && p.ret) {  // a clustered RET's stub
      if (slot != one_byte_jump_place(s.at, orig))
        return make_error("a RET's stub at {:#x}, not at its place", slot);
      auto stub = jump_to(slot, timed.bodies.at(idx));
      if (!stub) return stub.error();
      GOTAP_TRY(put(region.at[k], *stub));
      jump = std::vector<uint8_t>{0xe9};
    } else if (!region.ring) {  // a short check's stub
      if (slot != short_site_trampoline(s, orig))
        return make_error("a short check's stub at {:#x}, not at its place", slot);
      auto stub = short_stub(slot, s, orig, timed.bodies.at(idx));
      if (!stub) return stub.error();
      GOTAP_TRY(put(region.at[k], *stub));
      jump = short_site_jump(s, orig);
    } else {
      const uint64_t body = code + region.body[k];
      const RecordCapture* cap = timed.captures ? &timed.captures->at(idx) : nullptr;
      const uint64_t counter = code + region.code_size() + k * kCounterStride;
      auto b = timed.fail_words
                   ? (p.ret ? ret_fail_body(body, s, orig, counter, timed.fail_words->at(idx))
                            : entry_count_body(body, s, counter))
               : p.ret ? ret_body(body, s, orig, timed.events, id, cap)
                       : entry_body(body, s, timed.events, id, cap);
      if (!b) return b.error();
      GOTAP_TRY(put(region.body[k], *b));
      // Its jump goes to its stub, in another region.
      if (p.short_check || p.clustered()) continue;
      if (p.ret) {
        if (slot != one_byte_jump_place(s.at, orig))
          return make_error("a RET's stub at {:#x}, not at its place", slot);
        auto stub = jump_to(slot, body);
        if (!stub) return stub.error();
        GOTAP_TRY(put(region.at[k], *stub));
        jump = std::vector<uint8_t>{0xe9};
      } else {
        jump = branch_site_jump(s, body);
      }
    }
    if (!jump) return jump.error();
    if (jump->size() != l.len) return make_error("a jump of {} bytes at {:#x}", jump->size(), l.at);
    std::memcpy(l.jump.data(), jump->data(), jump->size());
    sites.push_back(l);
  }
  runs_of(used, out);
  return out;
}

Result<RegionCode> build_trampolines(const PatchSet& set, const Region& region, uint64_t bias,
                                     uint64_t code, const Owner& owner,
                                     std::vector<LiveSite>& sites, bool empty) {
  RegionCode out = header_only(region, owner);
  std::vector<bool> used(region.code_size() / kPage);
  used[0] = true;
  const uint64_t counters = code + region.code_size();
  sites.clear();
  sites.reserve(region.patches.size());
  for (size_t k = 0; k < region.patches.size(); ++k) {
    const Patch& p = set.patches[region.patches[k]];
    JumpSite s = p.site;
    s.at += bias;
    s.branch_to += bias;
    const Bytes orig(p.orig.data(), s.len);
    const uint64_t off = region.at[k], slot = code + off;
    if (off < kHeaderSize || off + kSlotSize > region.code_size())
      return make_error("a trampoline at {:#x} outside its region", slot);
    if (p.short_check && slot != short_site_trampoline(s, orig))
      return make_error("a short check's trampoline at {:#x}, not at its place", slot);
    auto t = count_trampoline(slot, s, orig, counters + k * kCounterStride, false);
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
    std::memcpy(out.bytes.data() + off, t->data(), t->size());
    used[off / kPage] = used[(off + t->size() - 1) / kPage] = true;
    auto j = p.short_check ? short_site_jump(s, orig) : branch_site_jump(s, slot);
    if (!j) return j.error();
    LiveSite l = live_site(p, bias);
    if (j->size() != l.len) return make_error("a jump of {} bytes at {:#x}", j->size(), l.at);
    std::memcpy(l.jump.data(), j->data(), j->size());
    sites.push_back(l);
  }
  runs_of(used, out);
  return out;
}

std::optional<Owner> region_owner(ptrace::TraceeMemory& mem, uint64_t code) {
  char head[kOwnerOffset + sizeof(Owner)] = {};
  if (!mem.read(code, head, sizeof head) || std::memcmp(head, kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  Owner owner;
  std::memcpy(&owner, head + kOwnerOffset, sizeof owner);
  return owner;
}

std::optional<uint64_t> left_jump(const LiveSite& s, const uint8_t* now) {
  int32_t rel = 0;
  if (s.len == s.check_len) {  // a 6-byte jbe's jno
    if (now[0] != 0x0f || now[1] != 0x81) return std::nullopt;
    std::memcpy(&rel, now + 2, 4);
    return s.at + s.len + static_cast<int64_t>(rel);
  }
  if (now[0] != 0xe9 || std::memcmp(now + 1, s.orig.data() + 1, s.check_len - 1) != 0)
    return std::nullopt;
  std::memcpy(&rel, now + 1, 4);
  return s.at + 5 + static_cast<int64_t>(rel);
}

LiveSite live_site(const Patch& p, uint64_t bias) {
  LiveSite l;
  l.at = p.site.at + bias;
  l.len = p.one_byte() ? 1 : p.site.len;
  // A RET's own byte is not the jump's: another tracer's probe on the RET can stay, and
  // fires still (the body jumps back to it).
  l.check_len = p.ret ? p.site.len - 1 : p.site.len;
  l.func = p.func;
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

bool held_by_uprobes(ptrace::TraceeMemory& mem, const LiveSite& s,
                     const std::map<uint64_t, std::string>& uprobes,
                     const std::function<std::optional<uint64_t>(uint64_t)>& to_offset) {
  uint8_t now[16];
  if (!mem.read(s.at, now, s.check_len)) return false;
  bool any = false;
  for (size_t i = 0; i < s.check_len; ++i) {
    if (now[i] == s.orig[i]) continue;
    const auto off = to_offset(s.at + i);
    if (now[i] != 0xCC || !off || !uprobes.count(*off)) return false;
    any = true;
  }
  return any;
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

void note_uprobes(pid_t pid, std::vector<LiveSite>& sites, const std::function<void()>& between) {
  // One iovec per page with sites (from its first site to its last), 256 pages a call:
  // an iovec a site cost 9 ms a look on a whole caddy, a page's most of that cost.
  constexpr size_t kBatch = 256;
  constexpr uint64_t kPage = 4096;
  struct Run {
    uint64_t lo = 0, hi = 0;
    size_t first = 0, last = 0;  // sites[first..last] in it
  };
  std::vector<Run> runs;
  for (size_t k = 0; k < sites.size(); ++k) {
    const LiveSite& s = sites[k];
    if (!s.written || s.len != 6 || s.uprobe_seen) continue;
    if (!runs.empty() && runs.back().lo / kPage == s.at / kPage && s.at >= runs.back().lo) {
      runs.back().hi = s.at + 1;
      runs.back().last = k;
    } else {
      runs.push_back({s.at, s.at + 1, k, k});
    }
  }
  std::vector<uint8_t> buf(kBatch * kPage);
  std::vector<iovec> local, remote;
  for (size_t b = 0; b < runs.size(); b += kBatch) {
    if (b && between) between();
    const size_t n = std::min(kBatch, runs.size() - b);
    local.clear();
    remote.clear();
    size_t used = 0;
    for (size_t r = b; r < b + n; ++r) {
      const size_t len = runs[r].hi - runs[r].lo;
      local.push_back({buf.data() + used, len});
      remote.push_back({reinterpret_cast<void*>(runs[r].lo), len});
      used += len;
    }
    // A short read ends at a page it could not read: the rest wait for the next look.
    const ssize_t got =
        process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
    if (got <= 0) continue;
    size_t at = 0;
    for (size_t r = b; r < b + n; ++r) {
      const Run& run = runs[r];
      if (at + (run.hi - run.lo) > size_t(got)) break;
      for (size_t k = run.first; k <= run.last; ++k) {
        LiveSite& s = sites[k];
        if (s.written && s.len == 6 && s.at >= run.lo && s.at < run.hi &&
            buf[at + (s.at - run.lo)] == kInt3)
          s.uprobe_seen = true;
      }
      at += run.hi - run.lo;
    }
  }
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
    s.written = false;
    if (std::memcmp(now, s.orig.data(), s.len) == 0) {
      // A uprobe came and went: the kernel put back the file's first byte, all a short
      // check's jump is.
      ++t.taken;
      continue;
    }
    // The first byte may be a uprobe's int3 now: the rest goes back under it.
    const size_t from = now[0] == kInt3 ? 1 : 0;
    if (std::memcmp(now + from, s.jump.data() + from, s.len - from) != 0) {
      ++t.foreign;
      continue;
    }
    t.taken += from || s.uprobe_seen;
    if (from == s.len) continue;  // the file's bytes are under that int3 already
    if (!mem.write(s.at + from, s.orig.data() + from, s.len - from)) {
      ++t.failed;
      s.written = true;
      continue;
    }
    ++t.written;
  }
  return t;
}

}  // namespace gotap::trampoline
