#include "core/binary/wait_reason_table.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

namespace gotap {

namespace {

constexpr std::string_view kFirst = "GC assist marking";  // waitReasonGCAssistMarking = 1
constexpr std::string_view kSecond = "IO wait";           // waitReasonIOWait = 2
constexpr size_t kMaxReasons = 256;                       // waitReason is a uint8
constexpr size_t kMaxLen = 64;
constexpr int kMaxCandidates = 16;

// A wait reason: short printable ASCII.
std::optional<std::string> name_at(const ElfFile& elf, uint64_t ptr, uint64_t len) {
  if (len == 0 || len > kMaxLen) return std::nullopt;
  Bytes b = elf.read(ptr, len);
  if (b.empty()) return std::nullopt;
  for (uint8_t c : b)
    if (c < 0x20 || c > 0x7e) return std::nullopt;
  return std::string(b.begin(), b.end());
}

// The array whose entry 1 is the string header at `at` (entry 0 is ""), up to `max` entries.
std::vector<std::string> read_from(const ElfFile& elf, uint64_t at, size_t max) {
  std::vector<std::string> out;
  if (at < 16) return out;
  Bytes zero = elf.read(at - 16, 16);
  if (zero.size() != 16 || le64(zero, 8).value_or(1) != 0) return out;
  out.push_back("");
  for (uint64_t a = at; out.size() < max; a += 16) {
    Bytes h = elf.read(a, 16);
    if (h.size() != 16) break;
    auto name = name_at(elf, *le64(h, 0), *le64(h, 8));
    if (!name) break;
    out.push_back(std::move(*name));
  }
  if (out.size() < 3 || out[1] != kFirst || out[2] != kSecond) return {};
  return out;
}

}  // namespace

std::vector<std::string> read_wait_reason_table(const ElfFile& elf) {
  if (const ElfSymbol* s = elf.symbol("runtime.waitReasonStrings"); s && s->size >= 48)
    return read_from(elf, s->value + 16, std::min<uint64_t>(s->size / 16, kMaxReasons));
  // Stripped: the address of the bytes of "GC assist marking" (read-only segments), then a
  // string header {that address, 17} at 8-byte alignment in the writable ones.
  std::vector<uint64_t> texts;
  for (const auto& seg : elf.segments()) {
    if (seg.type != PT_LOAD || (seg.flags & PF_W) || (seg.flags & PF_X)) continue;
    Bytes d = elf.at_vaddr(seg.vaddr);
    std::string_view v(reinterpret_cast<const char*>(d.data()), d.size());
    for (size_t p = v.find(kFirst); p != std::string_view::npos && texts.size() < kMaxCandidates;
         p = v.find(kFirst, p + 1))
      texts.push_back(seg.vaddr + p);
  }
  if (texts.empty()) return {};
  for (const auto& seg : elf.segments()) {
    if (seg.type != PT_LOAD || !(seg.flags & PF_W)) continue;
    Bytes d = elf.at_vaddr(seg.vaddr);
    uint64_t start = (8 - (seg.vaddr & 7)) & 7;
    for (uint64_t off = start; off + 16 <= d.size(); off += 8) {
      uint64_t ptr, len;
      std::memcpy(&ptr, d.data() + off, 8);
      std::memcpy(&len, d.data() + off + 8, 8);
      if (len != kFirst.size() || std::find(texts.begin(), texts.end(), ptr) == texts.end())
        continue;
      auto t = read_from(elf, seg.vaddr + off, kMaxReasons);
      if (!t.empty()) return t;
    }
  }
  return {};
}

}  // namespace gotap
