// How the trampoline backend turns eBPF's capture plan into a trampoline's and a trace record
// back into eBPF's event (backends/trampoline/trace_capture.h): the same words in the same
// order, the copies it may make (strings, itab types) and those it may not (payloads,
// chains) kept as places, and each copy's bytes packed in order with its bit set only when
// it was read: a string whose bytes were not copied (its data word no address) is not read,
// an empty one is.
#include <cstring>

#include <gtest/gtest.h>

#include "backends/trampoline/trace_capture.h"
#include "core/plan/event_ring.h"

namespace gotap::trampoline {
namespace {

gotap_probe probe_of() {
  gotap_probe p{};
  p.func_id = 3;
  p.nwords = 5;
  p.words[0] = {GOTAP_SRC_REG, GOTAP_RAX, 0, 0};
  p.words[1] = {GOTAP_SRC_REG, GOTAP_RBX, 0, 0};
  p.words[2] = {GOTAP_SRC_STACK, 0, 0, 16};
  p.words[3] = {GOTAP_SRC_REG, GOTAP_RCX, 0, 0};
  p.words[4] = {GOTAP_SRC_REG, GOTAP_RDI, 0, 0};
  p.ncaps = 5;
  p.caps[0] = {GOTAP_CAP_STRING, 0, 1, 0, 16, 0};
  p.caps[1] = {GOTAP_CAP_ITAB, 3, 0, 0, 8, 0};
  p.caps[2] = {GOTAP_CAP_DEREF, 4, 0, 0, 16, 0};
  p.caps[3] = {GOTAP_CAP_STRING, 4, 2, 0, 16, 0};
  p.caps[4] = {GOTAP_CAP_CHAIN, 3, 4, 0, 64, 0};
  return p;
}

TEST(TraceCapture, TheTrampolinesCaptureIsEbpfsWithTheCopiesItMayMake) {
  const RecordCapture c = capture_of(probe_of());
  ASSERT_EQ(c.words.size(), 5u);
  EXPECT_EQ(c.words[0].src, CaptureWord::Reg);
  EXPECT_EQ(c.words[0].reg, GOTAP_RAX);
  EXPECT_EQ(c.words[2].src, CaptureWord::Stack);
  EXPECT_EQ(c.words[2].off, 16);
  ASSERT_EQ(c.copies.size(), 5u) << "one place per cap: eBPF's cap indexes stay";
  EXPECT_EQ(c.copies[0].kind, CaptureCopy::String);
  EXPECT_EQ(c.copies[0].max, 16);
  EXPECT_EQ(c.copies[1].kind, CaptureCopy::Itab);
  EXPECT_EQ(c.copies[2].kind, CaptureCopy::None) << "a payload may run past its object";
  EXPECT_EQ(c.copies[3].kind, CaptureCopy::String);
  EXPECT_EQ(c.copies[4].kind, CaptureCopy::None) << "a chain follows pointers";
  EXPECT_EQ(c.copy_room(2), 0);
  EXPECT_EQ(c.copy_at(1), c.copy_at(0) + 16);
}

TEST(TraceCapture, ARecordBecomesEbpfsEventWithItsCopiesPacked) {
  TraceSites t;
  t.cfg.add_site(0x401000, probe_of());
  t.probe = {0};
  t.captures = {capture_of(probe_of())};
  const RecordCapture& c = t.captures[0];
  std::vector<uint8_t> rec(kTraceRing.record_size());
  auto put = [&](size_t off, const void* p, size_t n) { std::memcpy(rec.data() + off, p, n); };
  const RingRecord r{1, 12345, 42, 0 << 1 | 1, 96};
  put(0, &r, sizeof r);
  const uint32_t tid = 777;
  put(kTraceTid, &tid, 4);
  // words: a string (data, 5), the stack word, an itab, a second string's data (no
  // address: not copied) whose length (the stack word) is 9.
  const uint64_t words[5] = {0x7f0000001000, 5, 9, 0x7f0000002000, 0x10};
  put(kTraceWords, words, sizeof words);
  const uint16_t lens[5] = {5, 8, 0, 0, 0};
  put(kTraceCopyLen, lens, sizeof lens);
  put(c.copy_at(0), "hello", 5);
  const uint64_t type = 0x4a0000;
  put(c.copy_at(1), &type, 8);
  gotap_event ev;
  const size_t size = to_ebpf_event(rec.data(), t, 0, 4242, 99, uint64_t{500}, ev);
  EXPECT_EQ(ev.kind, GOTAP_EV_RETURN);
  EXPECT_EQ(ev.duration_ns, 500u);
  EXPECT_EQ(ev.flags & GOTAP_EVF_UNMATCHED, 0);
  EXPECT_EQ(ev.pid, 4242u);
  EXPECT_EQ(ev.tid, 777u);
  EXPECT_EQ(ev.goid, 42u);
  EXPECT_EQ(ev.ts_ns, 99u);
  EXPECT_EQ(ev.func_id, 3u);
  EXPECT_EQ(ev.probe, 0u);
  ASSERT_EQ(ev.nwords, 5);
  EXPECT_EQ(ev.words[3], 0x7f0000002000u);
  EXPECT_EQ(ev.cap_ok, 0b00011) << "the string and the itab; not the uncopied string";
  EXPECT_EQ(ev.cap_len[0], 5);
  EXPECT_EQ(ev.cap_len[1], 8);
  ASSERT_EQ(ev.data_len, 13);
  EXPECT_EQ(std::memcmp(ev.data, "hello", 5), 0);
  uint64_t got = 0;
  std::memcpy(&got, ev.data + 5, 8);
  EXPECT_EQ(got, type);
  EXPECT_EQ(size, offsetof(gotap_event, data) + 13);
  // An empty string is read; a return whose entry was not seen has no duration.
  const uint64_t empty[5] = {0, 0, 0, 0, 0};
  put(kTraceWords, empty, sizeof empty);
  const uint16_t none[5] = {0, 0, 0, 0, 0};
  put(kTraceCopyLen, none, sizeof none);
  to_ebpf_event(rec.data(), t, 0, 4242, 99, std::nullopt, ev);
  EXPECT_EQ(ev.cap_ok, 0b01001) << "both strings, empty; not the nil itab";
  EXPECT_NE(ev.flags & GOTAP_EVF_UNMATCHED, 0);
  EXPECT_EQ(ev.data_len, 0);
}

}  // namespace
}  // namespace gotap::trampoline
