// latency --why on eBPF: the kernel's sums per function and latency bucket turned into `why`
// and `why_slowest` (backends/ebpf/why_sums.h), and the ranges that tell the kernel which
// frames are the program's own. The sums are made up here, each number chosen so that the
// expected totals follow by hand.
#include <gtest/gtest.h>

#include <map>

#include "backends/ebpf/why_sums.h"
#include "core/binary/pclntab.h"
#include "core/plan/go_binary.h"
#include "fixtures.h"

using namespace gotap;
using namespace gotap::ebpf;
using gotap::testing::all_fixtures;

namespace {

WhyNames names(bool kernel = true) {
  static const std::map<uint64_t, std::string> funcs = {{0x1000, "main.park"},
                                                        {0x2000, "main.wake"}};
  WhyNames n;
  n.func_of = [](uint64_t pc) {
    auto it = funcs.find(pc);
    return it == funcs.end() ? std::string() : it->second;
  };
  n.wait_reasons = {"", "select", "IO wait", "chan receive"};
  n.preempted_measured = kernel;
  n.syscalls_named = kernel;
  return n;
}

gotap_why_wait_key wait_key(uint32_t bucket, uint32_t reason, uint32_t waker, uint64_t parked,
                            uint64_t waker_pc) {
  return {0, bucket, reason, waker, parked, waker_pc};
}

// 300 calls: 297 quick ones in bucket 10, two in bucket 200 that wait on a channel another
// goroutine sends on, and one in bucket 300 that waits for the network. 1% is three calls: the
// two top buckets.
std::map<uint32_t, WhyBucket> three_buckets() {
  std::map<uint32_t, WhyBucket> b;
  b[10].parts = {297, 297'000, 0, 0, 0, 0};
  b[200].parts = {2, 10, 5, 20, 30, 2'000};
  // pcs are return addresses: the function is looked up at pc - 1.
  b[200].waits.push_back(
      {wait_key(200, 3, GOTAP_WAKER_GOROUTINE, 0x1001, 0x2001), gotap_why_sum{2'000, 2}});
  b[200].syscalls.push_back({35, gotap_why_sum{30, 2}});  // nanosleep
  b[300].parts = {1, 1, 0, 0, 0, 5'000};
  b[300].waits.push_back(
      {wait_key(300, 2, GOTAP_WAKER_SCHEDULER, 0x1001, 0), gotap_why_sum{5'000, 1}});
  return b;
}

}  // namespace

TEST(WhySums, TotalsHoldEveryBucketAndTheSlowestTheTopOnes) {
  auto [why, slow] = why_of(three_buckets(), names());
  SCOPED_TRACE(why.dump());
  EXPECT_EQ(why["calls"], 300);
  EXPECT_EQ(why["running_ns"], 297'000 + 10 + 1);
  EXPECT_EQ(why["preempted_ns"], 5);
  EXPECT_EQ(why["runnable_ns"], 20);
  EXPECT_EQ(why["syscall_ns"], 30);
  EXPECT_EQ(why["waiting_ns"], 7'000);
  ASSERT_EQ(why["waits"].size(), 2u);
  // Largest first; the scheduler's end of an IO wait is the network poller's.
  EXPECT_EQ(why["waits"][0]["reason"], "IO wait");
  EXPECT_EQ(why["waits"][0]["woken_by"], nlohmann::json({{"by", "netpoll"}}));
  EXPECT_EQ(why["waits"][0]["parked_at"], "main.park");
  EXPECT_EQ(why["waits"][1]["reason"], "chan receive");
  EXPECT_EQ(why["waits"][1]["count"], 2);
  EXPECT_EQ(why["waits"][1]["woken_by"]["func"], "main.wake");
  ASSERT_EQ(why["syscalls"].size(), 1u);
  EXPECT_EQ(why["syscalls"][0]["name"], "nanosleep");
  EXPECT_EQ(why["syscalls"][0]["count"], 2);
  ASSERT_TRUE(why["shares"].is_object());

  SCOPED_TRACE(slow.dump());
  EXPECT_EQ(slow["calls"], 3);
  EXPECT_EQ(slow["running_ns"], 11);
  EXPECT_EQ(slow["waiting_ns"], 7'000);
  EXPECT_EQ(slow["waits"].size(), 2u);
}

TEST(WhySums, OneCallInAHundredIsTheTopBucketAlone) {
  auto b = three_buckets();
  // 99 calls: 1% is one call, the top bucket's alone.
  b.erase(200);
  b[10].parts.calls = 98;
  auto [why, slow] = why_of(b, names());
  EXPECT_EQ(why["calls"], 99);
  EXPECT_EQ(slow["calls"], 1);
  EXPECT_EQ(slow["waiting_ns"], 5'000);
}

TEST(WhySums, AnotherWaitTheSchedulerEndsIsATimersAndUnknownWakersAreNull) {
  std::map<uint32_t, WhyBucket> b;
  b[5].parts = {2, 0, 0, 0, 0, 300};
  b[5].waits.push_back({wait_key(5, 1, GOTAP_WAKER_SCHEDULER, 0, 0), gotap_why_sum{100, 1}});
  b[5].waits.push_back(
      {wait_key(5, GOTAP_WHY_NO_REASON, GOTAP_WAKER_UNKNOWN, 0, 0), gotap_why_sum{200, 1}});
  auto [why, slow] = why_of(b, names());
  SCOPED_TRACE(why.dump());
  ASSERT_EQ(why["waits"].size(), 2u);
  EXPECT_TRUE(why["waits"][0]["reason"].is_null());
  EXPECT_TRUE(why["waits"][0]["woken_by"].is_null());
  EXPECT_TRUE(why["waits"][0]["parked_at"].is_null());
  EXPECT_EQ(why["waits"][1]["reason"], "select");
  EXPECT_EQ(why["waits"][1]["woken_by"], nlohmann::json({{"by", "timer"}}));
}

TEST(WhySums, KernelPartsAreNullWhereTheTracepointsWereNotAttached) {
  auto [why, slow] = why_of(three_buckets(), names(false));
  EXPECT_TRUE(why["preempted_ns"].is_null());
  EXPECT_TRUE(why["syscalls"].is_null());
  EXPECT_TRUE(why["shares"]["preempted"].is_null());
  EXPECT_EQ(why["waiting_ns"], 7'000);
}

TEST(WhySums, NoCallSplitIsNull) {
  auto [why, slow] = why_of({}, names());
  EXPECT_TRUE(why.is_null());
  EXPECT_TRUE(slow.is_null());
}

// The kernel keeps a frame when its pc is in one of these ranges: every function whose name
// first_user_frame keeps, and none of the runtime's, sync's or internal/'s, whatever the load
// bias.
TEST(WhySums, KeepRangesHoldTheProgramsFunctionsAndNoRuntimes) {
  size_t checked = 0;
  for (const auto& fx : all_fixtures("why")) {
    if (fx.flavour != "default" && fx.flavour != "pie") continue;
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    const Pclntab& pcln = (*bin)->pclntab();
    const uint64_t bias = 0x5500'0000'0000;
    const auto ranges = why_keep_ranges(pcln, bias);
    ASSERT_FALSE(ranges.empty());
    ASSERT_LE(ranges.size(), size_t{GOTAP_WHY_RANGES});
    auto kept = [&](uint64_t pc) {
      auto it = std::upper_bound(ranges.begin(), ranges.end(), pc,
                                 [](uint64_t p, const gotap_why_range& r) { return p < r.lo; });
      return it != ranges.begin() && pc < std::prev(it)->hi;
    };
    for (size_t i = 1; i < ranges.size(); ++i) ASSERT_LT(ranges[i - 1].hi, ranges[i].lo + 1);
    for (const PclnFunc& f : pcln.all_funcs()) {
      if (f.end <= f.entry) continue;
      const std::string name(f.name);
      const bool user = !(name.starts_with("runtime.") || name.starts_with("runtime/") ||
                          name.starts_with("sync.") || name.starts_with("sync/") ||
                          name.starts_with("internal/"));
      ASSERT_EQ(kept(f.entry + bias), user) << name;
      ASSERT_EQ(kept(f.end - 1 + bias), user) << name;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no why fixtures (tests/tools/build-fixtures.sh)";
}
