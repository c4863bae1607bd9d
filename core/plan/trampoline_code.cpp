#include "core/plan/trampoline_code.h"

#include "core/plan/event_ring.h"

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

namespace {

// Appends `bytes` then a rel32 to `to`, measured from the end of that rel32 at `at` +
// out.size() + 4; false when out of reach.
bool with_rel32(std::vector<uint8_t>& out, uint64_t at, std::initializer_list<uint8_t> bytes,
                uint64_t to, std::initializer_list<uint8_t> after = {}) {
  out.insert(out.end(), bytes);
  const auto r = rel32(at + out.size() + 4 + after.size(), to);
  if (!r) return false;
  put32(out, *r);
  out.insert(out.end(), after);
  return true;
}

// The record (event_ring.h), at `at` + out.size(): take a position unless the ring is full,
// fill the record, write its seq last. Registers kept, flags clobbered.
bool append_record(std::vector<uint8_t>& out, uint64_t at, const EventTarget& t, uint32_t id) {
  const uint64_t head = t.ring + kRingHead, tail = t.ring + kRingTail,
                 dropped = t.ring + kRingDropped, records = t.ring + kRingRecords;
  auto imm32 = [&](uint32_t v) { put32(out, static_cast<int32_t>(v)); };
  out.insert(out.end(), {0x50, 0x51, 0x52, 0x56});                   // push rax, rcx, rdx, rsi
  out.insert(out.end(), {0x0f, 0x31,                                 // rdtsc
                         0x48, 0xc1, 0xe2, 0x20,                     // shl rdx, 32
                         0x48, 0x09, 0xc2,                           // or rdx, rax
                         0x48, 0x89, 0xd6});                         // mov rsi, rdx: the time
  if (!with_rel32(out, at, {0x48, 0x8b, 0x05}, head)) return false;  // mov rax, [head]
  const size_t retry = out.size();
  out.insert(out.end(), {0x48, 0x89, 0xc1});                         // mov rcx, rax
  if (!with_rel32(out, at, {0x48, 0x2b, 0x0d}, tail)) return false;  // sub rcx, [tail]
  out.insert(out.end(), {0x48, 0x81, 0xf9});                         // cmp rcx, capacity
  imm32(static_cast<uint32_t>(kRingCapacity));
  // Signed: a head read before another writer took a position and the reader freed it is
  // behind the tail; that difference is negative, not a full ring, and the cmpxchg below
  // fails on it and reloads the head.
  out.insert(out.end(), {0x7d, 0x00});  // jge full (patched below)
  const size_t jae = out.size();
  out.insert(out.end(), {0x48, 0x8d, 0x48, 0x01});  // lea rcx, [rax + 1]
  if (!with_rel32(out, at, {0xf0, 0x48, 0x0f, 0xb1, 0x0d}, head))
    return false;       // lock cmpxchg [head], rcx: rax is the head again when another took it
  out.push_back(0x75);  // jne retry
  out.push_back(static_cast<uint8_t>(static_cast<int8_t>(retry - (out.size() + 1))));
  out.insert(out.end(), {0x48, 0x25});  // and rax, mask
  imm32(static_cast<uint32_t>(kRingCapacity - 1));
  out.insert(out.end(), {0x48, 0xc1, 0xe0, 0x05});                      // shl rax, 5
  if (!with_rel32(out, at, {0x48, 0x8d, 0x15}, records)) return false;  // lea rdx, [records]
  out.insert(out.end(), {0x48, 0x01, 0xc2,                              // add rdx, rax
                         0x48, 0x89, 0x72, 0x08,                        // mov [rdx+8], rsi
                         0x49, 0x8b, 0x86});                            // mov rax, [r14+goid]
  imm32(t.goid_off);
  out.insert(out.end(), {0x48, 0x89, 0x42, 0x10,  // mov [rdx+16], rax
                         0x49, 0x8b, 0x86});      // mov rax, [r14+stack.hi]
  imm32(t.stack_hi_off);
  out.insert(out.end(), {0x48, 0x29, 0xe0,    // sub rax, rsp
                         0xc7, 0x42, 0x18});  // mov dword [rdx+24], id
  imm32(id);
  out.insert(out.end(), {0x89, 0x42, 0x1c,  // mov [rdx+28], eax
                         0x48, 0x89, 0x0a,  // mov [rdx], rcx: the seq, last
                         0xeb, 0x00});      // jmp done (patched below)
  const size_t jmp_done = out.size();
  out[jae - 1] = static_cast<uint8_t>(out.size() - jae);                      // full:
  if (!with_rel32(out, at, {0xf0, 0x48, 0xff, 0x05}, dropped)) return false;  // lock inc
  out[jmp_done - 1] = static_cast<uint8_t>(out.size() - jmp_done);            // done:
  out.insert(out.end(), {0x5e, 0x5a, 0x59, 0x58});  // pop rsi, rdx, rcx, rax
  return true;
}

}  // namespace

Result<std::vector<uint8_t>> entry_body(uint64_t at, const JumpSite& site, const EventTarget& t,
                                        uint32_t id) {
  if (!site.ok() || !site.branch_len) return make_error("{:#x} is no stack check", site.at);
  std::vector<uint8_t> out;
  // A 6-byte jbe's jno lands here with the check not yet taken; a short check's stub took it.
  if (site.branch_len == kJbeLen && site.len == kJbeLen &&
      !with_rel32(out, at, {kJbeRel32[0], kJbeRel32[1]}, site.branch_to))
    return make_error("site {:#x}'s morestack path is out of reach of {:#x}", site.at, at);
  if (!append_record(out, at, t, id))
    return make_error("the event ring is out of reach of {:#x}", at);
  if (!with_rel32(out, at, {kJmpRel32}, site.at + site.len))
    return make_error("site {:#x} is out of reach of {:#x}", site.at, at);
  if (out.size() > kBodyMax) return make_error("a body of {} bytes", out.size());
  return out;
}

Result<std::vector<uint8_t>> short_stub(uint64_t at, const JumpSite& site, Bytes original,
                                        uint64_t body) {
  if (!is_short(site, original)) return make_error("{:#x} is no short stack check", site.at);
  std::vector<uint8_t> out(original.begin(), original.end() - site.branch_len);
  if (!with_rel32(out, at, {kJbeRel32[0], kJbeRel32[1]}, site.branch_to) ||
      !with_rel32(out, at, {kJmpRel32}, body))
    return make_error("short check {:#x}'s stub at {:#x}: a jump out of reach", site.at, at);
  return out;
}

Result<std::vector<uint8_t>> ret_body(uint64_t at, const JumpSite& site, Bytes original,
                                      const EventTarget& t, uint32_t id) {
  if (!site.ok() || (site.len != 6 && site.len != 7) || original.size() != site.len ||
      original[4] != kPopRbp)
    return make_error("{:#x} is no RET epilogue", site.at);
  std::vector<uint8_t> out(original.begin(), original.begin() + 5);  // add rsp, N; pop rbp
  if (!append_record(out, at, t, id))
    return make_error("the event ring is out of reach of {:#x}", at);
  if (!with_rel32(out, at, {kJmpRel32}, site.at + 5))
    return make_error("site {:#x} is out of reach of {:#x}", site.at, at);
  if (out.size() > kBodyMax) return make_error("a body of {} bytes", out.size());
  return out;
}

Result<std::vector<uint8_t>> jump_to(uint64_t at, uint64_t to) {
  std::vector<uint8_t> out;
  if (!with_rel32(out, at, {kJmpRel32}, to))
    return make_error("{:#x} is out of reach of {:#x}", to, at);
  return out;
}

uint64_t one_byte_jump_place(uint64_t site, Bytes original) {
  if (original.size() < 5) return 0;
  int32_t rel = 0;
  std::memcpy(&rel, original.data() + 1, 4);
  return site + kJumpLen + static_cast<uint64_t>(static_cast<int64_t>(rel));
}

}  // namespace gotap
