#include "core/plan/trampoline_code.h"

#include "core/plan/event_ring.h"

#include <cpuid.h>

#include <algorithm>
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

// Whether this CPU (the traced program's too) has PREFETCHW: CPUID 0x80000001, ECX bit 8.
bool cpu_has_prefetchw() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
  }();
  return has;
}

// The x86 encoding of a CaptureWord's register.
constexpr uint8_t kX86Reg[] = {0, 3, 1, 7, 6, 8, 9, 10, 11, 2, 12, 13, 14, 15, 5, 4};
constexpr uint8_t kRsp = 4;

void put_disp32(std::vector<uint8_t>& out, uint32_t v) {
  put32(out, static_cast<int32_t>(v));
}

// --stack: the return addresses of the goroutine's frames, at record offset `at` (at most
// `room` bytes, a multiple of 8), their byte count at `len_at`; rdx at the record, rcx kept,
// rax, rsi and rdi free, `pushed` bytes pushed since the site. The return address at RSP
// (at the site) + `ret_off` first, then Go's frame records from RBP, as bpf/stack_walk.h
// walks them; every read is within (RSP, g.stack.hi) of a thread whose RSP is in its g's
// stack, which Go keeps mapped (trampoline_code.h, CaptureCopy::Stack).
bool append_stack_walk(std::vector<uint8_t>& out, const EventTarget& t, uint32_t pushed,
                       int32_t ret_off, uint32_t at, uint16_t room, uint8_t len_at) {
  if (room < 8 || room % 8 || t.stack_hi_off < 8) return false;
  const uint32_t lo_off = t.stack_hi_off - 8;  // g.stack is {lo, hi}
  auto rel8 = [&](size_t from) { out[from - 1] = static_cast<uint8_t>(out.size() - from); };
  out.push_back(0x51);  // push rcx (the seq)
  pushed += 8;
  // RSP within [g.stack.lo, g.stack.hi), else no walk (the length stays 0).
  out.insert(out.end(), {0x49, 0x3b, 0xa6});  // cmp rsp, [r14 + stack.lo]
  put_disp32(out, lo_off);
  out.insert(out.end(), {0x0f, 0x82, 0, 0, 0, 0});  // jb done (rel32, patched below)
  const size_t jb_lo = out.size();
  out.insert(out.end(), {0x49, 0x3b, 0xa6});  // cmp rsp, [r14 + stack.hi]
  put_disp32(out, t.stack_hi_off);
  out.insert(out.end(), {0x0f, 0x83, 0, 0, 0, 0});  // jae done
  const size_t jae_hi = out.size();
  // rcx: the highest a frame record may start (g.stack.hi - 16).
  out.insert(out.end(), {0x49, 0x8b, 0x8e});  // mov rcx, [r14 + stack.hi]
  put_disp32(out, t.stack_hi_off);
  out.insert(out.end(), {0x48, 0x83, 0xe9, 0x10});  // sub rcx, 16
  // rsi: the return address's slot; it must lie in (RSP, stack.hi - 8].
  out.insert(out.end(), {0x48, 0x8d, 0xb4, 0x24});  // lea rsi, [rsp + pushed + ret_off]
  put32(out, static_cast<int32_t>(pushed) + ret_off);
  out.insert(out.end(), {0x48, 0x8d, 0x41, 0x08,    // lea rax, [rcx + 8]
                         0x48, 0x39, 0xc6,          // cmp rsi, rax
                         0x0f, 0x87, 0, 0, 0, 0});  // ja done
  const size_t ja_slot = out.size();
  out.insert(out.end(), {0x48, 0x8b, 0x06,    // mov rax, [rsi]
                         0x48, 0x89, 0x82});  // mov [rdx + at], rax
  put_disp32(out, at);
  out.insert(out.end(), {0xbf, 8,    0,    0,    0,  // mov edi, 8: the bytes written
                         0x48, 0x83, 0xee, 0x08,     // sub rsi, 8: slot - 8, the lowest bound
                         0x48, 0x89, 0xe8,           // mov rax, rbp: the caller's frame record
                         0x48, 0x39, 0xf0,           // cmp rax, rsi
                         0x75, 0x03,                 // jne +3
                         0x48, 0x8b, 0x00});         // mov rax, [rax]: the site's own record
  // loop: while edi < room and rsi < rax <= rcx and rax is 8-aligned
  const size_t loop = out.size();
  out.insert(out.end(), {0x81, 0xff});  // cmp edi, room
  put_disp32(out, room);
  out.insert(out.end(), {0x73, 0});  // jae end
  const size_t e1 = out.size();
  out.insert(out.end(), {0x48, 0x39, 0xf0, 0x76, 0});  // cmp rax, rsi; jbe end
  const size_t e2 = out.size();
  out.insert(out.end(), {0x48, 0x39, 0xc8, 0x77, 0});  // cmp rax, rcx; ja end
  const size_t e3 = out.size();
  out.insert(out.end(), {0xa8, 0x07, 0x75, 0});  // test al, 7; jnz end
  const size_t e4 = out.size();
  out.insert(out.end(), {0x48, 0x8b, 0x70, 0x08,       // mov rsi, [rax + 8]: the return address
                         0x48, 0x85, 0xf6, 0x74, 0});  // test rsi, rsi; jz end
  const size_t e5 = out.size();
  out.insert(out.end(), {0x48, 0x89, 0xb4, 0x3a});  // mov [rdx + rdi + at], rsi
  put_disp32(out, at);
  out.insert(out.end(), {0x83, 0xc7, 0x08,  // add edi, 8
                         0x48, 0x89, 0xc6,  // mov rsi, rax: the next must be above
                         0x48, 0x8b, 0x00,  // mov rax, [rax]: the saved RBP
                         0xeb});            // jmp loop
  out.push_back(static_cast<uint8_t>(static_cast<int8_t>(loop - (out.size() + 1))));
  for (size_t e : {e1, e2, e3, e4, e5}) rel8(e);
  // end: the length
  out.insert(out.end(), {0x66, 0x89, 0x7a, len_at});  // mov [rdx + len_at], di
  // done:
  for (size_t j : {jb_lo, jae_hi, ja_slot}) {
    const int32_t rel = static_cast<int32_t>(out.size() - j);
    std::memcpy(out.data() + j - 4, &rel, 4);
  }
  out.push_back(0x59);  // pop rcx
  return true;
}

// mov reg, [rdx + words[word]]: a trace record's word (rdx at the record); `reg_modrm` is
// the ModRM byte of reg with [rdx + disp32].
void load_record_word(std::vector<uint8_t>& out, uint8_t reg_modrm, uint8_t word) {
  out.insert(out.end(), {0x48, 0x8b, reg_modrm});
  put_disp32(out, kTraceWords + 8u * word);
}

// rax = min(rax, room): a copy's length cut to its room.
void append_cut_to_room(std::vector<uint8_t>& out, uint16_t room) {
  out.insert(out.end(), {0x48, 0x3d});  // cmp rax, room
  put_disp32(out, room);
  out.insert(out.end(), {0x76, 0x05, 0xb8});  // jbe +5; mov eax, room
  put_disp32(out, room);
}

// The copy of rax bytes (not 0) from rsi into the record at `at`, last byte first, their
// count at [rdx + len_at]; rdi clobbered. Reads [rsi, rsi + rax) and nothing else.
void append_byte_copy(std::vector<uint8_t>& out, uint32_t at, uint8_t len_at) {
  out.insert(out.end(), {0x66, 0x89, 0x42, len_at});  // mov [rdx + len_at], ax
  const size_t loop = out.size();
  out.insert(out.end(), {0x48, 0xff, 0xc8,          // dec rax
                         0x0f, 0xb6, 0x3c, 0x06,    // movzx edi, byte [rsi + rax]
                         0x40, 0x88, 0xbc, 0x02});  // mov [rdx + rax + at], dil
  put_disp32(out, at);
  out.push_back(0x75);  // jnz loop: dec's flags
  out.push_back(static_cast<uint8_t>(static_cast<int8_t>(loop - (out.size() + 1))));
}

// An interface's payload (CaptureCopy::Payload): up to `room` bytes of what its data word
// points to, at record offset `at`, their count at `len_at`; rdx at the record, rax, rsi and
// rdi free. eBPF copies 16 bytes there whatever they are (a faulting read is no harm in the
// kernel); here each read must be safe by Go's own invariants, so the dynamic type decides:
// - a type stored indirectly (a boxed value: not Size_ == PtrBytes == 8, which is what Go
//   1.26 caches as TFlagDirectIface and older releases as KindDirectIface) points to its
//   own object, Size_ bytes, the runtime's or the program's: at most that many are read;
// - a pointer type's data word is a typed pointer: at most its element's Size_ bytes;
// - a map's or channel's is the runtime's header (48 bytes or more): 16;
// - other direct types (unsafe.Pointer, func, a struct or array of one pointer, which may be
//   an unsafe.Pointer) are not read: any address may be in them.
// The type words it reads are the descriptors' own (Size_ at 0, PtrBytes at 8, Kind_ at 23,
// a pointer type's Elem at 48: the same on every release since 1.17), and only through
// user-space addresses past the first page, as every other read of a record.
void append_payload(std::vector<uint8_t>& out, const CaptureCopy& c, uint32_t at, uint16_t room,
                    uint8_t len_at) {
  std::vector<size_t> to_skip;  // rel32s that go to the end
  auto jcc_skip = [&](std::initializer_list<uint8_t> op) {
    out.insert(out.end(), op);
    out.insert(out.end(), {0, 0, 0, 0});
    to_skip.push_back(out.size());
  };
  // Whether `reg` (rax: 0, rsi: 6) is a user-space address past the first page, with `tmp`.
  auto check = [&](uint8_t reg, uint8_t tmp) {
    out.insert(out.end(), {0x48, 0x89, static_cast<uint8_t>(0xc0 | reg << 3 | tmp),  // mov tmp, reg
                           0x48, 0xc1, static_cast<uint8_t>(0xe8 | tmp), 47});       // shr tmp, 47
    jcc_skip({0x0f, 0x85});                                                          // jnz skip
    if (reg == 0)
      out.insert(out.end(), {0x48, 0x3d});  // cmp rax, 4096
    else
      out.insert(out.end(), {0x48, 0x81, static_cast<uint8_t>(0xf8 | reg)});  // cmp reg, 4096
    put32(out, 4096);
    jcc_skip({0x0f, 0x82});  // jb skip
  };
  load_record_word(out, 0x82, c.aux);  // mov rax, type (or itab)
  check(0, 6);
  if (c.off == 1) {
    out.insert(out.end(), {0x48, 0x8b, 0x40, 0x08});  // mov rax, [rax + 8]: the itab's type
    check(0, 6);
  }
  load_record_word(out, 0xb2, c.word);  // mov rsi, data
  check(6, 7);
  out.insert(out.end(), {0x48, 0x83, 0x38, 0x08,  // cmp qword [rax], 8: Size_
                         0x75, 0});               // jne indirect
  const size_t jne1 = out.size();
  out.insert(out.end(), {0x48, 0x83, 0x78, 0x08, 0x08,  // cmp qword [rax + 8], 8: PtrBytes
                         0x75, 0});                     // jne indirect
  const size_t jne2 = out.size();
  out.insert(out.end(), {0x0f, 0xb6, 0x78, 0x17,  // movzx edi, byte [rax + 23]: Kind_
                         0x83, 0xe7, 0x1f,        // and edi, 31
                         0x83, 0xff, 22,          // cmp edi, Pointer
                         0x74, 0});               // je pointer
  const size_t je_ptr = out.size();
  out.insert(out.end(), {0x83, 0xff, 21,  // cmp edi, Map
                         0x74, 0,         // je header
                         0x83, 0xff, 18,  // cmp edi, Chan
                         0x74, 0});       // je header
  const size_t je_map = out.size() - 5, je_chan = out.size();
  jcc_skip({0xe9});  // anything else direct: nothing read
  const size_t header = out.size();
  out.insert(out.end(), {0xb8, 16, 0, 0, 0,  // mov eax, 16
                         0xeb, 0});          // jmp sized
  const size_t jmp_sized = out.size();
  const size_t pointer = out.size();
  out.insert(out.end(), {0x48, 0x8b, 0x40, 0x30});  // mov rax, [rax + 48]: Elem
  check(0, 7);
  const size_t indirect = out.size();
  out.insert(out.end(), {0x48, 0x8b, 0x00});  // mov rax, [rax]: Size_
  const size_t sized = out.size();
  append_cut_to_room(out, room);
  out.insert(out.end(), {0x48, 0x85, 0xc0});  // test rax, rax
  jcc_skip({0x0f, 0x84});                     // jz skip
  append_byte_copy(out, at, len_at);
  auto rel8_to = [&](size_t from, size_t to) {
    out[from - 1] = static_cast<uint8_t>(static_cast<int8_t>(to - from));
  };
  rel8_to(jne1, indirect);
  rel8_to(jne2, indirect);
  rel8_to(je_ptr, pointer);
  rel8_to(je_map, header);
  rel8_to(je_chan, header);
  rel8_to(jmp_sized, sized);
  for (size_t j : to_skip) {
    const int32_t rel = static_cast<int32_t>(out.size() - j);
    std::memcpy(out.data() + j - 4, &rel, 4);
  }
}

// A trace record's fields past the RingRecord (event_ring.h), with rdx at the record, rcx its
// seq (kept), rax, rsi and rdi free, and `pushed` bytes pushed since the site: the thread's
// id, the words, the copies.
bool append_capture(std::vector<uint8_t>& out, const EventTarget& t, const RecordCapture& cap,
                    uint32_t pushed, uint32_t record_size) {
  if (cap.words.size() > kTraceMaxWords || cap.copies.size() > kTraceMaxCopies) return false;
  out.insert(out.end(), {0x49, 0x8b, 0x86});  // mov rax, [r14 + g.m]
  put_disp32(out, t.m_off);
  // A running goroutine always has its m; a nil one is not read (the tid stays 0).
  out.insert(out.end(), {0x48, 0x85, 0xc0, 0x74, 0x06,  // test rax, rax; jz +6
                         0x8b, 0x80});                  // mov eax, [rax + m.procid]
  put_disp32(out, t.procid_off);
  out.insert(out.end(), {0x89, 0x42, kTraceTid,                              // mov [rdx+32], eax
                         0xc7, 0x42, kTraceCopyLen, 0, 0, 0, 0,              // the copies' lengths
                         0x48, 0xc7, 0x42, kTraceCopyLen + 4, 0, 0, 0, 0});  // 0 for now
  auto store_rax = [&](uint32_t to) {
    out.insert(out.end(), {0x48, 0x89, 0x82});  // mov [rdx + to], rax
    put_disp32(out, to);
  };
  // Where the trampoline's pushes (rax rcx rdx rsi rdi, in that order) keep each register.
  auto saved_at = [&](uint8_t x) -> int {
    switch (x) {
      case 0:
        return 32;
      case 1:
        return 24;
      case 2:
        return 16;
      case 6:
        return 8;
      case 7:
        return 0;
      default:
        return -1;
    }
  };
  for (size_t i = 0; i < cap.words.size(); ++i) {
    const CaptureWord& w = cap.words[i];
    const uint32_t to = kTraceWords + 8 * static_cast<uint32_t>(i);
    if (w.src == CaptureWord::Stack) {
      out.insert(out.end(), {0x48, 0x8b, 0x84, 0x24});  // mov rax, [rsp + pushed + off]
      put32(out, static_cast<int32_t>(pushed) + w.off);
      store_rax(to);
      continue;
    }
    if (w.src == CaptureWord::Deref) {
      if (w.base >= i) return false;
      out.insert(out.end(), {0x48, 0x8b, 0x82});  // mov rax, [rdx + words[base]]
      put_disp32(out, kTraceWords + 8u * w.base);
      // As deref_read: mov rsi, rax; shr rsi, 47; jnz skip; cmp rax, 4096; jb skip
      out.insert(out.end(), {0x48, 0x89, 0xc6, 0x48, 0xc1, 0xee, 0x2f, 0x75, 0, 0x48, 0x3d, 0x00,
                             0x10, 0x00, 0x00, 0x72, 0});
      const size_t jb = out.size(), jnz = jb - 8;
      // The field's own bytes, no more: a 4-byte field may end its object's last page.
      switch (w.size) {
        case 8:
          out.insert(out.end(), {0x48, 0x8b, 0x80});  // mov rax, [rax + off]
          break;
        case 4:
          out.insert(out.end(), {0x8b, 0x80});  // mov eax, [rax + off]
          break;
        case 2:
          out.insert(out.end(), {0x0f, 0xb7, 0x80});  // movzx eax, word [rax + off]
          break;
        case 1:
          out.insert(out.end(), {0x0f, 0xb6, 0x80});  // movzx eax, byte [rax + off]
          break;
        default:
          return false;
      }
      put32(out, w.off);
      store_rax(to);
      out[jb - 1] = static_cast<uint8_t>(out.size() - jb);
      out[jnz - 1] = static_cast<uint8_t>(out.size() - jnz);
      continue;
    }
    if (w.reg >= sizeof kX86Reg) return false;
    const uint8_t x = kX86Reg[w.reg];
    if (x == kRsp) {
      out.insert(out.end(), {0x48, 0x8d, 0x84, 0x24});  // lea rax, [rsp + pushed]: the RET's
      put_disp32(out, pushed);
      store_rax(to);
    } else if (const int at = saved_at(x); at >= 0) {
      out.insert(out.end(),
                 {0x48, 0x8b, 0x44, 0x24, static_cast<uint8_t>(at)});  // mov rax, [rsp+at]
      store_rax(to);
    } else {
      // mov [rdx + to], reg
      out.insert(out.end(), {static_cast<uint8_t>(0x48 | (x >> 3) << 2), 0x89,
                             static_cast<uint8_t>(0x80 | (x & 7) << 3 | 2)});
      put_disp32(out, to);
    }
  }
  for (size_t i = 0; i < cap.copies.size(); ++i) {
    const CaptureCopy& c = cap.copies[i];
    const uint8_t len_at = static_cast<uint8_t>(kTraceCopyLen + 2 * i);
    const uint32_t at = cap.copy_at(i);
    const uint16_t room = cap.copy_room(i);
    if (c.kind == CaptureCopy::None || !room) continue;
    if (at + room > record_size) return false;
    if (c.kind == CaptureCopy::Stack) {
      if (!append_stack_walk(out, t, pushed, c.off, at, room, len_at)) return false;
      continue;
    }
    if (c.word >= cap.words.size() ||
        ((c.kind == CaptureCopy::String || c.kind == CaptureCopy::Payload) &&
         c.aux >= cap.words.size()))
      return false;
    if (c.kind == CaptureCopy::Payload) {
      append_payload(out, c, at, room, len_at);
      continue;
    }
    if (c.kind == CaptureCopy::Itab) {
      load_record_word(out, 0x82, c.word);  // mov rax, itab
      // Not nil, and a user-space address (a plan's error would show as a bad word, never as
      // a read of one): mov rsi, rax; shr rsi, 47; jnz skip; cmp rax, 4096; jb skip
      out.insert(out.end(), {0x48, 0x89, 0xc6, 0x48, 0xc1, 0xee, 0x2f, 0x75, 0, 0x48, 0x3d, 0x00,
                             0x10, 0x00, 0x00, 0x72, 0});
      const size_t jz = out.size(), jnz = jz - 8;
      out.insert(out.end(), {0x48, 0x8b, 0x40, 0x08});  // mov rax, [rax + 8]: its type
      store_rax(at);
      out.insert(out.end(), {0x66, 0xc7, 0x42, len_at, 8, 0});  // its length: 8
      out[jz - 1] = static_cast<uint8_t>(out.size() - jz);
      out[jnz - 1] = static_cast<uint8_t>(out.size() - jnz);
      continue;
    }
    // A string's (or byte slice's) bytes, at most `room`, copied last byte first: Go's own
    // invariant makes [data, data + len) readable, and nothing past it is read.
    load_record_word(out, 0x82, c.aux);  // mov rax, len
    append_cut_to_room(out, room);
    out.insert(out.end(), {0x48, 0x85, 0xc0, 0x74, 0});  // test rax, rax; jz done
    const size_t jz = out.size();
    load_record_word(out, 0xb2, c.word);  // mov rsi, data
    // A user-space address past the first page, as any Go object's: mov rdi, rsi; shr rdi,
    // 47; jnz done; cmp rsi, 4096; jb done. Else nothing is copied and the length stays 0:
    // the decoder shows the string as not read.
    out.insert(out.end(), {0x48, 0x89, 0xf7, 0x48, 0xc1, 0xef, 0x2f, 0x75, 0, 0x48, 0x81, 0xfe,
                           0x00, 0x10, 0x00, 0x00, 0x72, 0});
    const size_t skip1 = out.size() - 9, skip2 = out.size();
    append_byte_copy(out, at, len_at);
    out[jz - 1] = static_cast<uint8_t>(out.size() - jz);
    out[skip1 - 1] = static_cast<uint8_t>(out.size() - skip1);
    out[skip2 - 1] = static_cast<uint8_t>(out.size() - skip2);
  }
  return true;
}

// The record (event_ring.h), at `at` + out.size(): take a position unless the ring is full,
// fill the record, write its seq last. Registers kept, flags clobbered. With `cap`, a trace
// record: rdi is kept too, and the record's rest filled (append_capture).
bool append_record(std::vector<uint8_t>& out, uint64_t at, const EventTarget& t, uint32_t id,
                   const RecordCapture* cap, uint32_t rsp_below = 0) {
  const uint64_t head = t.ring + kRingHead, tail = t.ring + kRingTail,
                 dropped = t.ring + kRingDropped, records = t.ring + kRingRecords;
  auto imm32 = [&](uint32_t v) { put32(out, static_cast<int32_t>(v)); };
  out.insert(out.end(), {0x50, 0x51, 0x52, 0x56});                   // push rax, rcx, rdx, rsi
  if (cap) out.push_back(0x57);                                      // push rdi
  out.insert(out.end(), {0x0f, 0x31,                                 // rdtsc
                         0x48, 0xc1, 0xe2, 0x20,                     // shl rdx, 32
                         0x48, 0x09, 0xc2,                           // or rdx, rax
                         0x48, 0x89, 0xd6});                         // mov rsi, rdx: the time
  if (!with_rel32(out, at, {0x48, 0x8b, 0x05}, head)) return false;  // mov rax, [head]
  const size_t retry = out.size();
  out.insert(out.end(), {0x48, 0x89, 0xc1});                         // mov rcx, rax
  if (!with_rel32(out, at, {0x48, 0x2b, 0x0d}, tail)) return false;  // sub rcx, [tail]
  out.insert(out.end(), {0x48, 0x81, 0xf9});                         // cmp rcx, capacity
  imm32(static_cast<uint32_t>(t.shape.capacity()));
  // Signed: a head read before another writer took a position and the reader freed it is
  // behind the tail; that difference is negative, not a full ring, and the cmpxchg below
  // fails on it and reloads the head. A trace record's code is longer than a rel8 reaches.
  if (cap)
    out.insert(out.end(), {0x0f, 0x8d, 0, 0, 0, 0});  // jge full (patched below)
  else
    out.insert(out.end(), {0x7d, 0x00});
  const size_t jae = out.size();
  out.insert(out.end(), {0x48, 0x8d, 0x48, 0x01});  // lea rcx, [rax + 1]
  if (!with_rel32(out, at, {0xf0, 0x48, 0x0f, 0xb1, 0x0d}, head))
    return false;       // lock cmpxchg [head], rcx: rax is the head again when another took it
  out.push_back(0x75);  // jne retry
  out.push_back(static_cast<uint8_t>(static_cast<int8_t>(retry - (out.size() + 1))));
  out.insert(out.end(), {0x48, 0x25});  // and rax, mask
  imm32(static_cast<uint32_t>(t.shape.capacity() - 1));
  out.insert(out.end(), {0x48, 0xc1, 0xe0, static_cast<uint8_t>(t.shape.record_shift)});  // shl
  if (!with_rel32(out, at, {0x48, 0x8d, 0x15}, records)) return false;  // lea rdx, [records]
  out.insert(out.end(), {0x48, 0x01, 0xc2});                            // add rdx, rax
  if (cap) {
    // prefetchw [rdx + 8 records + each line this record fills]: a trace record's lines are
    // new ones each time (512 bytes apart, too far for the hardware's prefetch), and the next
    // record's lock cmpxchg waits for this one's stores to reach them: without this, each
    // record waited for memory (about 180 ns a record, against 50 with it). A prefetch never
    // faults, past the ring's end too. A CPU without PREFETCHW (which it could fault on)
    // gets prefetcht0, which every x86-64 has.
    const uint8_t op = cpu_has_prefetchw() ? 0x0d : 0x18;  // both /1: ModRM 10 001 010
    const uint32_t used = cap->copy_at(cap->copies.size());
    for (uint32_t line = 0; line < used && line < 256; line += 64) {
      out.insert(out.end(), {0x0f, op, 0x8a});
      put_disp32(out, static_cast<uint32_t>(8 * t.shape.record_size()) + line);
    }
  }
  out.insert(out.end(), {0x48, 0x89, 0x72, 0x08,  // mov [rdx+8], rsi
                         0x49, 0x8b, 0x86});      // mov rax, [r14+goid]
  imm32(t.goid_off);
  out.insert(out.end(), {0x48, 0x89, 0x42, 0x10,  // mov [rdx+16], rax
                         0x49, 0x8b, 0x86});      // mov rax, [r14+stack.hi]
  imm32(t.stack_hi_off);
  out.insert(out.end(), {0x48, 0x29, 0xe0});  // sub rax, rsp
  // Go before 1.21 records its RET before its `add rsp, N`: the depth is the RET's.
  if (rsp_below) {
    out.insert(out.end(), {0x48, 0x2d});  // sub rax, N
    imm32(rsp_below);
  }
  out.insert(out.end(), {0xc7, 0x42, 0x18});  // mov dword [rdx+24], id
  imm32(id);
  out.insert(out.end(), {0x89, 0x42, 0x1c});  // mov [rdx+28], eax
  // The depth above is measured below the pushes, at a return and at an entry alike.
  if (cap &&
      !append_capture(out, t, *cap, 40 + rsp_below, static_cast<uint32_t>(t.shape.record_size())))
    return false;
  out.insert(out.end(), {0x48, 0x89, 0x0a,  // mov [rdx], rcx: the seq, last
                         0xeb, 0x00});      // jmp done (patched below)
  const size_t jmp_done = out.size();
  if (cap) {
    const int32_t rel = static_cast<int32_t>(out.size() - jae);
    std::memcpy(out.data() + jae - 4, &rel, 4);  // full:
  } else {
    out[jae - 1] = static_cast<uint8_t>(out.size() - jae);  // full:
  }
  if (!with_rel32(out, at, {0xf0, 0x48, 0xff, 0x05}, dropped)) return false;  // lock inc
  out[jmp_done - 1] = static_cast<uint8_t>(out.size() - jmp_done);            // done:
  if (cap) out.push_back(0x5f);                                               // pop rdi
  out.insert(out.end(), {0x5e, 0x5a, 0x59, 0x58});  // pop rsi, rdx, rcx, rax
  return true;
}

}  // namespace

Result<std::vector<uint8_t>> entry_body(uint64_t at, const JumpSite& site, const EventTarget& t,
                                        uint32_t id, const RecordCapture* cap) {
  if (!site.ok() || !site.branch_len) return make_error("{:#x} is no stack check", site.at);
  std::vector<uint8_t> out;
  // A 6-byte jbe's jno lands here with the check not yet taken; a short check's stub took it.
  if (site.branch_len == kJbeLen && site.len == kJbeLen &&
      !with_rel32(out, at, {kJbeRel32[0], kJbeRel32[1]}, site.branch_to))
    return make_error("site {:#x}'s morestack path is out of reach of {:#x}", site.at, at);
  if (!append_record(out, at, t, id, cap))
    return make_error("the event ring is out of reach of {:#x}, or a capture past its record", at);
  if (!with_rel32(out, at, {kJmpRel32}, site.at + site.len))
    return make_error("site {:#x} is out of reach of {:#x}", site.at, at);
  if (!cap && out.size() > kBodyMax) return make_error("a body of {} bytes", out.size());
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
                                      const EventTarget& t, uint32_t id, const RecordCapture* cap) {
  // add rsp, N; pop rbp; [nop;] ret (Go 1.21), or mov rbp, [rsp+D]; add rsp, N; ret.
  const auto form = ret_epilogue_form(original);
  if (!site.ok() || !form || original.size() != site.len || site.len <= form->runs)
    return make_error("{:#x} is no RET epilogue", site.at);
  std::vector<uint8_t> out(original.begin(), original.begin() + form->runs);
  if (!append_record(out, at, t, id, cap, form->rsp_below))
    return make_error("the event ring is out of reach of {:#x}, or a capture past its record", at);
  if (!with_rel32(out, at, {kJmpRel32}, site.at + form->runs))
    return make_error("site {:#x} is out of reach of {:#x}", site.at, at);
  if (!cap && out.size() > kBodyMax) return make_error("a body of {} bytes", out.size());
  return out;
}

Result<std::vector<uint8_t>> entry_count_body(uint64_t at, const JumpSite& site, uint64_t counter) {
  if (!site.ok() || !site.branch_len) return make_error("{:#x} is no stack check", site.at);
  if (counter % 8) return make_error("counter {:#x} is not 8-byte aligned", counter);
  std::vector<uint8_t> out;
  if (site.branch_len == kJbeLen && site.len == kJbeLen &&
      !with_rel32(out, at, {kJbeRel32[0], kJbeRel32[1]}, site.branch_to))
    return make_error("site {:#x}'s morestack path is out of reach of {:#x}", site.at, at);
  if (!with_rel32(out, at, {kLockIncRip[0], kLockIncRip[1], kLockIncRip[2], kLockIncRip[3]},
                  counter) ||
      !with_rel32(out, at, {kJmpRel32}, site.at + site.len))
    return make_error("the counter or site {:#x} is out of reach of {:#x}", site.at, at);
  return out;
}

Result<std::vector<uint8_t>> ret_fail_body(uint64_t at, const JumpSite& site, Bytes original,
                                           uint64_t counter, const CaptureWord& err) {
  const auto form = ret_epilogue_form(original);
  if (!site.ok() || !form || original.size() != site.len || site.len <= form->runs)
    return make_error("{:#x} is no RET epilogue", site.at);
  if (counter % 8) return make_error("counter {:#x} is not 8-byte aligned", counter);
  std::vector<uint8_t> out(original.begin(), original.begin() + form->runs);
  if (err.src == CaptureWord::Stack) {
    // cmp qword [rsp + disp32], 0: before Go 1.21 the frame is not freed yet (rsp_below).
    out.insert(out.end(), {0x48, 0x83, 0xbc, 0x24});
    put32(out, static_cast<int32_t>(form->rsp_below) + err.off);
    out.push_back(0);
  } else if (err.src == CaptureWord::Reg && err.reg < sizeof kX86Reg && kX86Reg[err.reg] != kRsp) {
    const uint8_t x = kX86Reg[err.reg];  // test reg, reg
    out.insert(out.end(), {static_cast<uint8_t>(0x48 | (x >> 3) << 2 | (x >> 3)), 0x85,
                           static_cast<uint8_t>(0xc0 | (x & 7) << 3 | (x & 7))});
  } else {
    return make_error("site {:#x}: an error word in no register or stack slot", site.at);
  }
  out.insert(out.end(), {0x74, static_cast<uint8_t>(kLockIncLen)});  // jz over the count
  if (!with_rel32(out, at, {kLockIncRip[0], kLockIncRip[1], kLockIncRip[2], kLockIncRip[3]},
                  counter) ||
      !with_rel32(out, at, {kJmpRel32}, site.at + form->runs))
    return make_error("the counter or site {:#x} is out of reach of {:#x}", site.at, at);
  return out;
}

Result<std::vector<uint8_t>> jump_to(uint64_t at, uint64_t to) {
  std::vector<uint8_t> out;
  if (!with_rel32(out, at, {kJmpRel32}, to))
    return make_error("{:#x} is out of reach of {:#x}", to, at);
  return out;
}

namespace {

// The same site and a target near address 0, where every rel32 reaches.
JumpSite near_zero(const JumpSite& site) {
  JumpSite s = site;
  s.branch_to = s.branch_to ? 0x1000 : 0;
  s.at = 0x2000;
  return s;
}

EventTarget sizing_target(const RecordCapture* cap) {
  EventTarget t;
  t.ring = 0x3000;
  if (cap) t.shape = kTraceRing;
  return t;
}

}  // namespace

size_t entry_body_size(const JumpSite& site, const RecordCapture* cap) {
  auto b = entry_body(0, near_zero(site), sizing_target(cap), 0, cap);
  return b ? b->size() : 0;
}

size_t ret_body_size(const JumpSite& site, Bytes original, const RecordCapture* cap) {
  auto b = ret_body(0, near_zero(site), original, sizing_target(cap), 0, cap);
  return b ? b->size() : 0;
}

size_t entry_count_body_size(const JumpSite& site) {
  auto b = entry_count_body(0, near_zero(site), 0x3000);
  return b ? b->size() : 0;
}

size_t ret_fail_body_size(const JumpSite& site, Bytes original, const CaptureWord& err) {
  auto b = ret_fail_body(0, near_zero(site), original, 0x3000, err);
  return b ? b->size() : 0;
}

uint32_t RecordCapture::copy_at(size_t i) const {
  uint32_t at = kTraceWords + 8 * static_cast<uint32_t>(words.size());
  for (size_t j = 0; j < i && j < copies.size(); ++j) at += copy_room(j);
  return at;
}

uint16_t RecordCapture::copy_room(size_t i) const {
  if (i >= copies.size()) return 0;
  const CaptureCopy& c = copies[i];
  if (c.kind == CaptureCopy::None) return 0;
  // The room left after the copies before this one.
  const uint32_t at = copy_at(i);
  const uint32_t size = static_cast<uint32_t>(kTraceRing.record_size());
  const uint32_t left = at < size ? size - at : 0;
  const uint32_t want = c.kind == CaptureCopy::Itab ? 8 : c.max;
  if (c.kind == CaptureCopy::Itab && left < 8) return 0;
  // Whole addresses only.
  if (c.kind == CaptureCopy::Stack) return static_cast<uint16_t>(std::min(want, left) & ~7u);
  return static_cast<uint16_t>(std::min(want, left));
}

uint64_t one_byte_jump_place(uint64_t site, Bytes original) {
  if (original.size() < 5) return 0;
  int32_t rel = 0;
  std::memcpy(&rel, original.data() + 1, 4);
  return site + kJumpLen + static_cast<uint64_t>(static_cast<int64_t>(rel));
}

}  // namespace gotap
