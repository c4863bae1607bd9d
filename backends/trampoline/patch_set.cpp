#include "backends/trampoline/patch_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "core/binary/elf_file.h"
#include "core/plan/disasm.h"
#include "core/plan/event_ring.h"
#include "core/plan/inline_mark.h"
#include "core/plan/trampoline_code.h"
#include "core/plan/trampoline_sites.h"

namespace gotap::trampoline {

namespace {

constexpr uint64_t kPage = 4096;

uint64_t page_up(uint64_t n) {
  return (n + kPage - 1) & ~(kPage - 1);
}

}  // namespace

uint64_t Region::ring_offset() const {
  return page_up(patches.size() * kCounterStride);
}

uint64_t Region::counter_size() const {
  if (stubs_only) return kPage;
  return ring_offset() + (ring ? ring_shape.bytes() : 0);
}

namespace {

// Where a one-byte jump's code must start, and how many bytes it takes there.
std::pair<uint64_t, uint64_t> fixed_place(const Patch& p, uint64_t bias) {
  if (p.ret) return {one_byte_jump_place(p.site.at + bias, Bytes(p.orig.data(), 5)), kJumpLen};
  return {short_trampoline(p, bias), kSlotSize};
}

// A region of fixed places: r.patches (those with one, not empty) at their places, its base
// the page of the first (or the page before, for the header), its size up to the page after
// the last one's code. The code's offsets go into r.at.
void place_fixed(const PatchSet& set, uint64_t bias, Region& r) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i : r.patches) {
    const auto [at, len] = fixed_place(set.patches[i], bias);
    lo = std::min(lo, at);
    hi = std::max(hi, at + len);
  }
  r.base = lo & ~(kPage - 1);
  if (lo - r.base < kHeaderSize) r.base -= kPage;
  r.size = page_up(hi) - r.base;
  r.at.clear();
  for (size_t i : r.patches) r.at.push_back(fixed_place(set.patches[i], bias).first - r.base);
}

}  // namespace

uint64_t short_trampoline(const Patch& p, uint64_t bias) {
  JumpSite s = p.site;
  s.at += bias;
  return short_site_trampoline(s, Bytes(p.orig.data(), s.len));
}

std::vector<Region> lay_out(const PatchSet& set, uint64_t bias) {
  Region near, far;
  for (size_t i = 0; i < set.patches.size(); ++i) {
    if (set.patches[i].short_check) {
      far.patches.push_back(i);
      continue;
    }
    near.at.push_back(kHeaderSize + near.patches.size() * kSlotSize);
    near.patches.push_back(i);
  }
  near.size = page_up(kHeaderSize + near.patches.size() * kSlotSize);
  std::vector<Region> out;
  if (!near.patches.empty()) out.push_back(std::move(near));
  if (far.patches.empty()) return out;
  place_fixed(set, bias, far);
  out.push_back(std::move(far));
  return out;
}

void drop_crowded(PatchSet& set) {
  std::vector<std::pair<uint64_t, size_t>> fixed;
  for (size_t i = 0; i < set.patches.size(); ++i)
    if (set.patches[i].one_byte()) fixed.emplace_back(fixed_place(set.patches[i], 0).first, i);
  std::sort(fixed.begin(), fixed.end());
  // A function is patched whole or not at all: its entry alone would leave its calls open.
  std::set<int> funcs;
  uint64_t free_from = 0;
  for (const auto& [at, i] : fixed) {
    if (at < free_from)
      funcs.insert(set.patches[i].func);
    else
      free_from = at + fixed_place(set.patches[i], 0).second;
  }
  size_t kept = 0;
  std::set<int> said;
  for (size_t i = 0; i < set.patches.size(); ++i) {
    const Patch& p = set.patches[i];
    if (!funcs.count(p.func)) {
      set.patches[kept++] = p;
      continue;
    }
    // Once per function: its entry comes before its RETs.
    if (said.insert(p.func).second)
      set.refused[p.short_check ? "a short function whose trampoline's place is another's"
                                : "a trampoline's fixed place is another's"]
          .push_back(p.func);
  }
  set.patches.resize(kept);
}

void drop_inline_collisions(PatchSet& set, const ProbePlan& plan) {
  std::vector<uint64_t> copies;
  for (const FuncPlan& f : plan.funcs)
    if (f.inline_probed)
      for (const InlineSite& s : f.inline_sites)
        if (s.skip_reason.empty() && s.pc) copies.push_back(s.pc);
  if (copies.empty()) return;
  std::sort(copies.begin(), copies.end());
  std::set<int> funcs;
  for (const Patch& p : set.patches) {
    auto it = std::lower_bound(copies.begin(), copies.end(), p.site.at);
    if (it != copies.end() && *it < p.site.at + p.site.len) funcs.insert(p.func);
  }
  if (funcs.empty()) return;
  // A function is patched whole or not at all (drop_crowded).
  std::erase_if(set.patches, [&](const Patch& p) { return funcs.count(p.func) != 0; });
  auto& refused = set.refused["an inlined copy's probe is in its jump's bytes"];
  refused.insert(refused.end(), funcs.begin(), funcs.end());
}

std::vector<Region> lay_out_timed(const PatchSet& set, uint64_t bias,
                                  const std::vector<size_t>& body_len, RingShape shape) {
  // The RETs' stubs at their places, then every patch's body after them.
  Region stubs, e, far;
  std::vector<std::pair<uint64_t, size_t>> wide;  // (place, patch)
  for (size_t i = 0; i < set.patches.size(); ++i) {
    const Patch& p = set.patches[i];
    if (p.clustered())
      wide.emplace_back(fixed_place(p, bias).first, i);
    else if (p.ret)
      stubs.patches.push_back(i);
    if (p.short_check) far.patches.push_back(i);
  }
  if (set.patches.empty()) return {};
  uint64_t bodies = kPage;
  if (!stubs.patches.empty()) {
    place_fixed(set, bias, stubs);
    e.base = stubs.base;
    bodies = stubs.size;
  } else {
    // Every RET clustered: the bodies where the stubs of narrow ones would be, 1.46 GiB past the
    // first site (their header in the page before).
    e.base = ((set.patches[0].site.at + bias + 0x5d400000) & ~(kPage - 1)) - kPage;
  }
  e.ring = true;
  e.ring_shape = shape;
  uint64_t body = bodies;
  for (size_t i = 0, k = 0; i < set.patches.size(); ++i) {
    const Patch& p = set.patches[i];
    e.patches.push_back(i);
    e.body.push_back(body);
    e.at.push_back(p.ret && !p.clustered() ? stubs.at[k++] : body);
    // 16-byte aligned, as a function's code
    body += i < body_len.size() ? (body_len[i] + 15) & ~size_t{15} : kBodyMax;
  }
  e.size = page_up(body);
  // Where each body is (the clustered stubs jump there), before the region moves.
  std::vector<uint64_t> body_at(set.patches.size());
  for (size_t k = 0; k < e.patches.size(); ++k) body_at[e.patches[k]] = e.base + e.body[k];
  const uint64_t first_end = e.base + e.code_size() + e.counter_size();
  std::vector<Region> out;
  out.push_back(std::move(e));
  if (!far.patches.empty()) {
    place_fixed(set, bias, far);
    if (first_end > far.base) return {};
    out.push_back(std::move(far));
  }
  // The clustered RETs' stubs, by place, in clusters split where 64 KiB are free (or, past
  // 1 MiB, three pages): a cluster whose place is taken (the program's own image may be
  // there) costs only its functions. Left out: a stub in the first two regions' pages, or out of
  // reach.
  std::sort(wide.begin(), wide.end());
  const size_t fixed = out.size();
  auto clear_of = [&](uint64_t at) {
    for (size_t r = 0; r < fixed; ++r) {
      const Region& g = out[r];
      const uint64_t lo = g.base - kPage, hi = g.base + g.code_size() + g.counter_size() + kPage;
      if (at + kJumpLen > lo && at < hi) return false;
    }
    return true;
  };
  Region cluster;
  uint64_t lo = 0, last = 0;
  auto flush = [&]() {
    if (cluster.patches.empty()) return;
    cluster.stubs_only = true;
    place_fixed(set, bias, cluster);
    out.push_back(std::move(cluster));
    cluster = Region{};
  };
  for (const auto& [at, i] : wide) {
    const int64_t reach = static_cast<int64_t>(body_at[i]) - static_cast<int64_t>(at + kJumpLen);
    if (!mappable_place(at) || !clear_of(at) || reach < INT32_MIN || reach > INT32_MAX) continue;
    // Split where 64 KiB are free, or past 1 MiB where three pages are: a cluster's pages
    // run from the page before its first stub (its header) to the page after its last.
    if (!cluster.patches.empty() &&
        (at - last > (64u << 10) || (at - lo > (1u << 20) && at - last >= 3 * kPage)))
      flush();
    if (cluster.patches.empty()) lo = at;
    last = at;
    cluster.patches.push_back(i);
  }
  flush();
  return out;
}

std::vector<int> stubless_functions(const PatchSet& set,
                                    const std::vector<const Region*>& regions) {
  std::vector<bool> stub(set.patches.size());
  for (const Region* r : regions)
    for (size_t i : r->patches) {
      const Patch& p = set.patches[i];
      // The bodies' region holds the stubs of the RETs that are not clustered; the others
      // hold stubs alone.
      if (!r->ring || (p.ret && !p.clustered())) stub[i] = true;
    }
  std::set<int> out;
  for (size_t i = 0; i < set.patches.size(); ++i)
    if (set.patches[i].one_byte() && !stub[i]) out.insert(set.patches[i].func);
  return {out.begin(), out.end()};
}

PatchSet plan_patches(const ProbePlan& plan, bool timed_run, const std::vector<bool>* entry_only) {
  PatchSet set;
  const ElfFile* elf = plan.binary_view.elf;
  for (size_t i = 0; i < plan.funcs.size(); ++i) {
    const FuncPlan& f = plan.funcs[i];
    const int fi = static_cast<int>(i);
    const bool timed = timed_run && !(entry_only && i < entry_only->size() && (*entry_only)[i]);
    const TrampolineSites t = trampoline_sites(elf, f);
    if (!t.refused.empty()) {
      set.refused[t.refused].push_back(fi);
      continue;
    }
    if (timed && !t.untimed.empty()) {
      set.refused[t.untimed].push_back(fi);
      continue;
    }
    Patch p;
    p.func = fi;
    p.site = t.entry;
    p.short_check = t.short_check;
    std::memcpy(p.orig.data(), t.code.data() + (p.site.at - f.entry), p.site.len);
    std::vector<Patch> rets;
    for (size_t k = 0; timed && k < t.rets.size(); ++k) {
      Patch r;
      r.func = fi;
      r.ret = true;
      r.site = t.rets[k];
      std::memcpy(r.orig.data(), t.code.data() + (r.site.at - f.entry), r.site.len);
      rets.push_back(r);
    }
    set.patches.push_back(p);
    set.patches.insert(set.patches.end(), rets.begin(), rets.end());
  }
  drop_crowded(set);
  return set;
}

std::vector<int> refused_functions(const PatchSet& set) {
  std::vector<int> out;
  for (const auto& [why, funcs] : set.refused) out.insert(out.end(), funcs.begin(), funcs.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::string refused_summary(const PatchSet& set, const ProbePlan& plan, const char* done,
                            const char* instead) {
  size_t n = 0;
  for (const auto& [why, funcs] : set.refused) n += funcs.size();
  if (!n) return "";
  std::string parts;
  for (const auto& [why, funcs] : set.refused) {
    std::string names;
    for (size_t k = 0; k < funcs.size() && k < 3; ++k)
      names += (k ? ", " : "") + plan.funcs[funcs[k]].name;
    if (funcs.size() > 3) names += ", ...";
    parts += fmt::format("{}{} {}: {}", parts.empty() ? "" : "; ", funcs.size(), why, names);
  }
  return fmt::format("{} of {} function{} {} no trampoline site and {} {}{}{} ({})", n,
                     plan.funcs.size(), plan.funcs.size() == 1 ? "" : "s", n == 1 ? "has" : "have",
                     n == 1 ? "is" : "are", instead ? "" : "not ", done,
                     instead ? fmt::format(" on {}", instead) : "", parts);
}

}  // namespace gotap::trampoline
