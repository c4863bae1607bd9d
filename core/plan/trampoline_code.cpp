#include "core/plan/trampoline_code.h"

#include <cstring>
#include <optional>

namespace gotap {

namespace {

constexpr uint8_t kPushfq = 0x9c, kPopfq = 0x9d, kJmpRel32 = 0xe9, kInt3 = 0xcc;
// lock inc qword [rip + disp32]: lock, REX.W, FF /0 with ModRM 00 000 101 (RIP-relative).
constexpr uint8_t kLockIncRip[] = {0xf0, 0x48, 0xff, 0x05};
constexpr size_t kLockIncLen = sizeof kLockIncRip + 4;

// The rel32 from the end of an instruction at `end` to `to`, when it fits.
std::optional<int32_t> rel32(uint64_t end, uint64_t to) {
  const int64_t d = static_cast<int64_t>(to - end);
  if (d < INT32_MIN || d > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(d);
}

void put32(std::vector<uint8_t>& out, int32_t v) {
  uint8_t b[4];
  std::memcpy(b, &v, 4);  // x86 is little-endian, as the encoding
  out.insert(out.end(), b, b + 4);
}

}  // namespace

constexpr uint8_t kJbeRel32[] = {0x0f, 0x86};
// jno rel32: the 6-byte jbe's own first byte, then the condition "no overflow".
constexpr uint8_t kJnoRel32[] = {0x0f, 0x81};
constexpr size_t kJbeLen = sizeof kJbeRel32 + 4;
constexpr size_t kCountLen = 1 + kLockIncLen + 1;

size_t count_trampoline_size(const JumpSite& site, bool ret) {
  if (site.branch_len) return site.len - site.branch_len + kJbeLen + kLockIncLen + kJumpLen;
  return kCountLen + site.len + (ret ? 0 : kJumpLen);
}

Result<std::vector<uint8_t>> count_trampoline(uint64_t at, const JumpSite& site, Bytes original,
                                              uint64_t counter, bool ret) {
  if (!site.ok()) return make_error("no jump fits at {:#x}: {}", site.at, site.refused);
  if (original.size() != site.len)
    return make_error("{} original bytes for a site of {}", original.size(), site.len);
  if (counter % 8) return make_error("counter {:#x} is not 8-byte aligned", counter);
  if (site.branch_len && (ret || site.branch_len > site.len))
    return make_error("site {:#x}: a stack check is an entry site", site.at);
  std::vector<uint8_t> out;
  out.reserve(count_trampoline_size(site, ret));
  // A stack check first, its jbe to the morestack path as it was: only a call that goes on
  // is counted.
  if (site.branch_len) {
    out.insert(out.end(), original.begin(), original.end() - site.branch_len);
    out.insert(out.end(), std::begin(kJbeRel32), std::end(kJbeRel32));
    const auto to = rel32(at + out.size() + 4, site.branch_to);
    if (!to) return make_error("site {:#x}'s morestack path is out of reach of {:#x}", site.at, at);
    put32(out, *to);
  }
  // Past a stack check the flags are dead: they are the check's own, read by its jbe alone
  // (the assembler adds the check after the compiler has laid out the body, which reads no
  // flags it did not set). Elsewhere they may be live.
  const bool keep_flags = !site.branch_len;
  if (keep_flags) out.push_back(kPushfq);
  out.insert(out.end(), std::begin(kLockIncRip), std::end(kLockIncRip));
  const auto to_counter = rel32(at + out.size() + 4, counter);
  if (!to_counter) return make_error("counter {:#x} is out of reach of {:#x}", counter, at);
  put32(out, *to_counter);
  if (keep_flags) out.push_back(kPopfq);
  if (!site.branch_len) out.insert(out.end(), original.begin(), original.end());
  if (!ret) {
    out.push_back(kJmpRel32);
    const auto back = rel32(at + out.size() + 4, site.at + site.len);
    if (!back) return make_error("site {:#x} is out of reach of {:#x}", site.at, at);
    put32(out, *back);
  }
  return out;
}

Result<std::vector<uint8_t>> site_jump(const JumpSite& site, uint64_t trampoline) {
  if (!site.ok()) return make_error("no jump fits at {:#x}: {}", site.at, site.refused);
  const auto to = rel32(site.at + kJumpLen, trampoline);
  if (!to) return make_error("trampoline {:#x} is out of reach of {:#x}", trampoline, site.at);
  std::vector<uint8_t> out{kJmpRel32};
  put32(out, *to);
  out.resize(site.len, kInt3);
  return out;
}

Result<std::vector<uint8_t>> branch_site_jump(const JumpSite& site, uint64_t trampoline) {
  if (!site.ok() || site.branch_len != kJbeLen || site.len != kJbeLen)
    return make_error("{:#x} is no 6-byte stack check jbe", site.at);
  const auto to = rel32(site.at + kJbeLen, trampoline);
  if (!to) return make_error("trampoline {:#x} is out of reach of {:#x}", trampoline, site.at);
  std::vector<uint8_t> out(std::begin(kJnoRel32), std::end(kJnoRel32));
  put32(out, *to);
  return out;
}

namespace {

bool is_short(const JumpSite& site, Bytes original) {
  return site.ok() && site.branch_len == 2 && site.len == kJumpLen + 1 &&
         original.size() == site.len && original[kJumpLen - 1] == kShortJbe;
}

}  // namespace

uint64_t short_site_trampoline(const JumpSite& site, Bytes original) {
  if (!is_short(site, original)) return 0;
  int32_t rel = 0;
  std::memcpy(&rel, original.data() + 1, 4);  // positive: its high byte is 0x76
  return site.at + kJumpLen + static_cast<uint64_t>(rel);
}

Result<std::vector<uint8_t>> short_site_jump(const JumpSite& site, Bytes original) {
  if (!is_short(site, original)) return make_error("{:#x} is no short stack check", site.at);
  return std::vector<uint8_t>{kJmpRel32};
}

}  // namespace gotap
