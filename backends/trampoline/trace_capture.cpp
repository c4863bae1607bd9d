#include "backends/trampoline/trace_capture.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>

#include "backends/trampoline/record_condition.h"
#include "bpf/gotap_limits.h"
#include "core/plan/event_ring.h"

namespace gotap::trampoline {

namespace {

// An eBPF word's place as a trampoline reads it: a register, or a stack slot from RSP.
CaptureWord capture_word(const gotap_word& w) {
  CaptureWord cw;
  if (w.src == GOTAP_SRC_STACK) {
    cw.src = CaptureWord::Stack;
    cw.off = w.off;
  } else {
    // GOTAP_SRC_REGMEM is gccgo's alone, which this backend does not take.
    cw.reg = w.reg;
  }
  return cw;
}

}  // namespace

void add_payloads(const ebpf::SiteConfig& site, RecordCapture& cap) {
  for (const ebpf::ParamCapture& pc : site.params) {
    if (pc.payload_cap < 0 || size_t(pc.payload_cap) >= cap.copies.size() || pc.words.size() < 2)
      continue;
    const int type = pc.words[0], data = pc.words[1];
    if (type < 0 || data < 0 || size_t(type) >= cap.words.size() ||
        size_t(data) >= cap.words.size())
      continue;
    CaptureCopy& c = cap.copies[pc.payload_cap];
    c.kind = CaptureCopy::Payload;
    c.word = static_cast<uint8_t>(data);
    c.aux = static_cast<uint8_t>(type);
    c.max = static_cast<uint16_t>(ebpf::kIfacePayloadBytes);
    c.off = pc.itab_cap >= 0 ? 1 : 0;
  }
}

RecordCapture capture_of(const gotap_probe& p) {
  RecordCapture c;
  for (size_t i = 0; i < p.nwords && i < kTraceMaxWords; ++i)
    c.words.push_back(capture_word(p.words[i]));
  for (size_t i = 0; i < p.ncaps && i < kTraceMaxCopies; ++i) {
    const gotap_cap& k = p.caps[i];
    CaptureCopy cc;
    cc.word = k.word;
    cc.aux = k.aux;
    if (k.kind == GOTAP_CAP_STRING && k.word < c.words.size() && k.aux < c.words.size()) {
      cc.kind = CaptureCopy::String;
      cc.max = k.max;
    } else if (k.kind == GOTAP_CAP_ITAB && k.word < c.words.size()) {
      cc.kind = CaptureCopy::Itab;
    }
    c.copies.push_back(cc);
  }
  return c;
}

Result<TraceSites> trace_sites(const ProbePlan& plan, PatchSet& set, int max_str,
                               const cond::Condition* cond, bool tally, bool count_failed,
                               int stack_depth) {
  TraceSites t;
  t.stack_depth = tally ? 0 : stack_depth;
  // A tally's plan is latency's: every function's entry and RETs, no word to decode, and
  // each RET's error word where the function has an error result (SiteConfig::err_word).
  t.cfg = tally ? ebpf::build_probe_config(plan, Mode::Latency, 0, plan.binary_view.types, nullptr,
                                           count_failed)
                : ebpf::build_probe_config(plan, Mode::Trace, max_str, plan.binary_view.types);
  // Each function's sites, in the order build_probe_config made them.
  std::vector<std::vector<uint32_t>> of(plan.funcs.size());
  for (size_t i = 0; i < t.cfg.sites.size(); ++i)
    if (t.cfg.sites[i].func_id < of.size()) of[t.cfg.sites[i].func_id].push_back(uint32_t(i));
  std::map<int, std::string> refused;  // function -> why its condition leaves it
  for (const Patch& p : set.patches) {
    std::optional<uint32_t> found;
    for (uint32_t i : of.at(p.func)) {
      const ebpf::SiteConfig& s = t.cfg.sites[i];
      if (s.flags & GOTAP_PROBE_INLINE) continue;
      const bool ret = s.flags & GOTAP_PROBE_RET;
      // A RET patch's range ends with its RET.
      if (p.ret ? ret && s.addr >= p.site.at && s.addr < p.site.at + p.site.len : !ret) {
        found = i;
        break;
      }
    }
    if (!found)
      return make_error("{}: no capture planned for its {} at {:#x}", plan.funcs[p.func].name,
                        p.ret ? "RET" : "entry", p.site.at);
    t.probe.push_back(*found);
    RecordCapture cap = tally ? RecordCapture{} : capture_of(t.cfg.record(*found));
    if (!tally) add_payloads(t.cfg.sites[*found], cap);
    t.decoded_words.push_back(static_cast<uint8_t>(cap.words.size()));
    t.decoded_copies.push_back(static_cast<uint8_t>(cap.copies.size()));
    int8_t err = -1;
    if (const ebpf::SiteConfig& s = t.cfg.sites[*found];
        tally && (s.flags & GOTAP_PROBE_ERRCHECK)) {
      err = static_cast<int8_t>(cap.words.size());
      cap.words.push_back(capture_word(s.err_word));
    }
    if (tally) t.err_word.push_back(err);
    if (cond && size_t(p.func) < cond->funcs.size() && !refused.count(p.func)) {
      const std::string why = add_condition_capture(cond->funcs[p.func].prog, p.ret, cap);
      if (!why.empty()) refused[p.func] = "whose --if " + why;
    }
    if (t.stack_depth > 1 && !refused.count(p.func)) {
      // As eBPF's walk: at most GOTAP_MAX_STACK return addresses after the site's pc.
      const int want = std::min(t.stack_depth - 1, GOTAP_MAX_STACK);
      CaptureCopy walk;
      walk.kind = CaptureCopy::Stack;
      walk.max = static_cast<uint16_t>(8 * want);
      walk.off = t.cfg.sites[*found].ret_off;
      cap.copies.push_back(walk);
      if (cap.copies.size() > kTraceMaxCopies || cap.copy_room(cap.copies.size() - 1) < walk.max)
        refused[p.func] = "whose record has no room for --stack " + std::to_string(t.stack_depth) +
                          " beside its arguments";
    }
    t.captures.push_back(std::move(cap));
  }
  if (refused.empty()) {
    t.shape = record_ring_shape(t.captures);
    return t;
  }
  // Those functions go whole: their entry and all their RETs.
  TraceSites kept;
  kept.cfg = std::move(t.cfg);
  PatchSet left;
  left.refused = std::move(set.refused);
  for (size_t i = 0; i < set.patches.size(); ++i) {
    if (refused.count(set.patches[i].func)) continue;
    left.patches.push_back(set.patches[i]);
    kept.probe.push_back(t.probe[i]);
    kept.captures.push_back(std::move(t.captures[i]));
    kept.decoded_words.push_back(t.decoded_words[i]);
    kept.decoded_copies.push_back(t.decoded_copies[i]);
    if (tally) kept.err_word.push_back(t.err_word[i]);
  }
  for (const auto& [func, why] : refused) left.refused[why].push_back(func);
  set = std::move(left);
  kept.shape = record_ring_shape(kept.captures);
  return kept;
}

RingShape record_ring_shape(const std::vector<RecordCapture>& captures) {
  uint64_t need = kTraceWords;
  for (const RecordCapture& c : captures) {
    uint64_t end = c.copy_at(c.copies.size());
    // A copy's room is cut to what a kTraceRing record has left (copy_room): a smaller record
    // would cut it shorter than the decoder and the condition read.
    if (!c.copies.empty()) end = kTraceRing.record_size();
    need = std::max(need, end);
  }
  unsigned shift = 6;  // 64 bytes: the record, the thread, and two words
  while ((uint64_t(1) << shift) < need && shift < kTraceRing.record_shift) ++shift;
  // 4 MiB of records: 65,536 of 64 bytes, 8,192 of 512 (kTraceRing's).
  return RingShape{22 - shift, shift};
}

size_t to_ebpf_event(const uint8_t* record, const TraceSites& sites, uint32_t patch, int pid,
                     uint64_t ts_ns, std::optional<uint64_t> duration_ns, gotap_event& ev) {
  RingRecord r;
  std::memcpy(&r, record, sizeof r);
  const RecordCapture& cap = sites.captures[patch];
  const uint32_t probe = sites.probe[patch];
  const ebpf::SiteConfig& site = sites.cfg.sites[probe];
  std::memset(&ev, 0, offsetof(gotap_event, words));
  ev.ts_ns = ts_ns;
  ev.goid = r.goid;
  ev.pid = static_cast<uint32_t>(pid);
  std::memcpy(&ev.tid, record + kTraceTid, 4);
  ev.probe = probe;
  ev.func_id = site.func_id;
  ev.kind = (r.id & 1) ? GOTAP_EV_RETURN : GOTAP_EV_ENTRY;
  if (ev.kind == GOTAP_EV_RETURN) {
    if (duration_ns)
      ev.duration_ns = *duration_ns;
    else
      ev.flags |= GOTAP_EVF_UNMATCHED;
  }
  // The condition's words past the site's own are not the decoder's.
  const size_t nwords = patch < sites.decoded_words.size()
                            ? std::min<size_t>(cap.words.size(), sites.decoded_words[patch])
                            : cap.words.size();
  ev.nwords = static_cast<uint8_t>(nwords);
  const size_t ncaps = patch < sites.decoded_copies.size()
                           ? std::min<size_t>(cap.copies.size(), sites.decoded_copies[patch])
                           : cap.copies.size();
  ev.ncaps = static_cast<uint8_t>(ncaps);
  std::memcpy(ev.words, record + kTraceWords, 8 * nwords);
  size_t data = 0;
  for (size_t i = 0; i < ncaps; ++i) {
    uint16_t len = 0;
    std::memcpy(&len, record + kTraceCopyLen + 2 * i, 2);
    const CaptureCopy& c = cap.copies[i];
    // A string was read when its bytes were copied or it has none (its length word is 0);
    // an itab's type, when the itab was not nil.
    uint64_t str_len = 1;
    if (c.kind == CaptureCopy::String && c.aux < cap.words.size())
      std::memcpy(&str_len, record + kTraceWords + 8 * c.aux, 8);
    const bool ok = (c.kind == CaptureCopy::String && (len || !str_len)) ||
                    (c.kind == CaptureCopy::Itab && len == 8) ||
                    (c.kind == CaptureCopy::Payload && len);
    if (!ok || len > cap.copy_room(i) || data + len > GOTAP_DATA_MAX) continue;
    std::memcpy(ev.data + data, record + cap.copy_at(i), len);
    ev.cap_len[i] = len;
    ev.cap_ok |= static_cast<uint16_t>(1u << i);
    data += len;
  }
  ev.data_len = static_cast<uint16_t>(data);
  // --stack: the walk's return addresses after the copied bytes, as eBPF sends them.
  if (sites.stack_depth > 0 && !cap.copies.empty() &&
      cap.copies.back().kind == CaptureCopy::Stack) {
    const size_t i = cap.copies.size() - 1;
    uint16_t len = 0;
    std::memcpy(&len, record + kTraceCopyLen + 2 * i, 2);
    len = static_cast<uint16_t>(std::min<size_t>(len, cap.copy_room(i)) & ~size_t{7});
    if (data + len <= sizeof ev.data) {
      std::memcpy(ev.data + data, record + cap.copy_at(i), len);
      ev.nstack = static_cast<uint16_t>(len / 8);
      data += len;
    }
  }
  return offsetof(gotap_event, data) + data;
}

}  // namespace gotap::trampoline
