// What the eBPF backend puts in and reads out of its maps, apart from a trace: the attach
// cookie's fields, the `errors` map's slots, and the batched reads of whole per-CPU arrays
// (the summary, --prometheus scrapes) against one lookup per entry. The map tests need root
// and BPF and skip with the reason otherwise.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ebpf/aggregates.h"
#include "backends/ebpf/call_limits.h"
#include "backends/ebpf/ebpf_backend.h"
#include "backends/ebpf/probe_config.h"
#include "core/plan/go_binary.h"
#include "gotap_limits.h"
#include "gotap_shared.h"
#include "tests/unit/fixtures.h"

namespace gotap::ebpf {
namespace {

TEST(EbpfCookie, CarriesSiteFlagsAndFunction) {
  const uint32_t sites[] = {0, 1, 4095, 116520, GOTAP_COOKIE_MAX_SITES - 1};
  const uint8_t flags[] = {0, GOTAP_PROBE_RET, GOTAP_PROBE_UNCOUNT | GOTAP_PROBE_TLS_G,
                           GOTAP_PROBE_ERRCHECK | GOTAP_PROBE_RET | GOTAP_PROBE_TRACK, 0xff};
  const uint32_t funcs[] = {0, 1, 46128, GOTAP_FUNC_GSTATUS, GOTAP_FUNC_GCREATED, 0xffffffffu};
  for (uint32_t s : sites)
    for (uint8_t f : flags)
      for (uint32_t fn : funcs) {
        const uint64_t c = gotap_cookie(s, f, fn);
        EXPECT_EQ(gotap_cookie_site(c), s);
        EXPECT_EQ(gotap_cookie_flags(c), f);
        EXPECT_EQ(gotap_cookie_func(c), fn);
      }
}

// The errors fixture's functions with an error result are mayFail and parse (its source);
// each gets a slot of its own in `errors`, the map has no other, and every RET site that
// checks the error names its function's slot. Stripped builds have no result types for plain
// functions, so no error results: the DWARF flavours only.
TEST(EbpfProbeConfig, ErrorSlotsOnlyForFunctionsWithAnErrorResult) {
  auto fx = gotap::testing::all_fixtures("errors");
  if (fx.empty()) GTEST_SKIP() << "no errors fixture (tests/tools/build-fixtures.sh)";
  for (const auto& f : fx) {
    if (f.flavour.find("stripped") != std::string::npos) continue;
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin) << bin.error().what();
    auto plan = (*bin)->plan({"re:^main\\."}, {});
    ASSERT_TRUE(plan) << plan.error().what();
    for (Mode mode : {Mode::Count, Mode::Latency, Mode::Trace}) {
      ProbeConfig cfg = build_probe_config(*plan, mode, 8, plan->binary_view.types);
      std::set<std::string> with_error;
      std::set<uint32_t> slots;
      for (const FuncConfig& fc : cfg.funcs) {
        if (!fc.has_error) continue;
        with_error.insert(fc.plan->name);
        EXPECT_LT(fc.err_slot, cfg.error_funcs);
        slots.insert(fc.err_slot);
      }
      EXPECT_EQ(with_error, (std::set<std::string>{"main.mayFail", "main.parse"}));
      EXPECT_EQ(slots.size(), cfg.error_funcs);
      size_t checked = 0;
      for (uint32_t i = 0; i < cfg.sites.size(); ++i) {
        const gotap_site_extra x = site_extra(cfg, i);
        if (!(cfg.sites[i].flags & GOTAP_PROBE_ERRCHECK)) {
          EXPECT_EQ(x.err.src, GOTAP_SRC_NONE);
          continue;
        }
        ++checked;
        EXPECT_NE(x.err.src, GOTAP_SRC_NONE);
        EXPECT_EQ(x.err_slot, cfg.funcs[cfg.sites[i].func_id].err_slot);
      }
      EXPECT_GE(checked, 2u);
    }
  }
}

#define REQUIRE_EBPF()                                                     \
  do {                                                                     \
    std::string why = unavailable_reason();                                \
    if (!why.empty()) GTEST_SKIP() << "eBPF backend unavailable: " << why; \
  } while (0)

struct MapFd {
  int fd = -1;
  ~MapFd() {
    if (fd >= 0) close(fd);
  }
};

// Past one batch (4,096 entries), so that the second batch starts after the first's last key.
TEST(EbpfMaps, BatchedPerCpuSumsEqualOneLookupEach) {
  REQUIRE_EBPF();
  const int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  for (uint32_t n : {1u, 2u, 4096u, 10001u}) {
    SCOPED_TRACE(n);
    MapFd m;
    m.fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "gotap_test", 4, 8, n, nullptr);
    ASSERT_GE(m.fd, 0) << strerror(errno);
    std::vector<uint64_t> want(n, 0), vals(static_cast<size_t>(ncpu));
    for (uint32_t k = 0; k < n; ++k) {
      if (k % 7 == 3) continue;  // left zero
      for (int c = 0; c < ncpu; ++c) {
        // Some CPUs' counters below zero (an uncount on one CPU, its call on another).
        vals[c] = (k + c) % 5 == 0 ? uint64_t(-int64_t(k + 1)) : uint64_t(k) * 1000 + c;
        want[k] += vals[c];
      }
      ASSERT_EQ(bpf_map_update_elem(m.fd, &k, vals.data(), BPF_ANY), 0) << strerror(errno);
    }
    const std::vector<uint64_t> got = read_percpu_u64_all(m.fd, n);
    ASSERT_EQ(got.size(), n);
    for (uint32_t k = 0; k < n; ++k) {
      ASSERT_EQ(got[k], want[k]) << "entry " << k;
      ASSERT_EQ(read_percpu_u64(m.fd, k), want[k]) << "entry " << k;
    }
  }
}

// Functions 0 and 5 of 9 have calls: their histograms (a range of lat_hist past entry 0 for
// function 5) are read whole, and the others are left out.
TEST(EbpfMaps, LatencyOfTheCalledFunctionsWithTheirHistograms) {
  REQUIRE_EBPF();
  const int ncpu = libbpf_num_possible_cpus();
  ASSERT_GT(ncpu, 0);
  const uint32_t nfuncs = 9;
  MapFd stats, hist;
  stats.fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, "gotap_test_st", 4, sizeof(gotap_lat_stats),
                            nfuncs, nullptr);
  hist.fd =
      bpf_map_create(BPF_MAP_TYPE_ARRAY, "gotap_test_h", 4, 8, nfuncs * GOTAP_NBUCKETS, nullptr);
  ASSERT_GE(stats.fd, 0) << strerror(errno);
  ASSERT_GE(hist.fd, 0) << strerror(errno);
  for (uint32_t f : {0u, 5u}) {
    std::vector<gotap_lat_stats> per_cpu(static_cast<size_t>(ncpu));
    per_cpu[0] = {2 + f, 100 + f, 10 + f, 90 + f};
    ASSERT_EQ(bpf_map_update_elem(stats.fd, &f, per_cpu.data(), BPF_ANY), 0);
    for (uint32_t b = 0; b < GOTAP_NBUCKETS; b += 37) {
      uint32_t key = f * GOTAP_NBUCKETS + b;
      uint64_t v = f * 100000 + b + 1;
      ASSERT_EQ(bpf_map_update_elem(hist.fd, &key, &v, BPF_ANY), 0);
    }
  }
  // A neighbour's buckets, to be kept out of function 5's.
  uint32_t key = 6 * GOTAP_NBUCKETS;
  uint64_t v = 777;
  ASSERT_EQ(bpf_map_update_elem(hist.fd, &key, &v, BPF_ANY), 0);

  const auto got = read_latency_all(stats.fd, hist.fd, nfuncs);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const uint32_t f = i == 0 ? 0 : 5;
    EXPECT_EQ(got[i].first, f);
    const LatencySummary& s = got[i].second;
    EXPECT_EQ(s.count, 2 + f);
    EXPECT_EQ(s.sum_ns, 100 + f);
    EXPECT_EQ(s.min_ns, 10 + f);
    EXPECT_EQ(s.max_ns, 90 + f);
    ASSERT_EQ(s.fine.size(), size_t(GOTAP_NBUCKETS));
    for (uint32_t b = 0; b < GOTAP_NBUCKETS; ++b)
      ASSERT_EQ(s.fine[b], b % 37 == 0 ? f * 100000 + b + 1 : 0)
          << "function " << f << " bucket " << b;
  }
}

}  // namespace
}  // namespace gotap::ebpf
