// What bounds one decode whatever the tracee's memory says (issue 35): the nesting of a value
// (a list 100,000 nodes deep, a type that contains itself) never overflows the stack, the
// bytes read and the time spent per event have a budget, a stop flag ends a decode at once,
// and a sparse map's few entries are found without reading every empty group or bucket.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "core/decode/value_decoder.h"

namespace gotap {
namespace {

using nlohmann::json;

enum : TypeId {
  kInt = 1,
  kNode,
  kPtrNode,
  kSelf,
  kString,
  kSliceString,
  kMapIntInt,
  kSlicePtrNode
};

TypeGraph make_graph() {
  TypeGraph g;
  auto add = [&](GoType t) { g.add(std::move(t)); };
  add({.id = kInt, .name = "int", .kind = GoKind::Int, .size = 8});
  // type Node struct { next *Node; v int }
  add({.id = kNode,
       .name = "main.Node",
       .kind = GoKind::Struct,
       .size = 16,
       .fields = {{"next", kPtrNode, 0}, {"v", kInt, 8}}});
  add({.id = kPtrNode, .name = "*main.Node", .kind = GoKind::Ptr, .size = 8, .elem = kNode});
  // No Go program has it, a crafted binary's DWARF may: a struct whose first field is itself.
  add({.id = kSelf,
       .name = "main.Self",
       .kind = GoKind::Struct,
       .size = 8,
       .fields = {{"self", kSelf, 0}}});
  add({.id = kString, .name = "string", .kind = GoKind::String, .size = 16});
  add({.id = kSliceString, .name = "[]string", .kind = GoKind::Slice, .size = 24, .elem = kString});
  add({.id = kMapIntInt,
       .name = "map[int]int",
       .kind = GoKind::Map,
       .size = 8,
       .elem = kInt,
       .key = kInt});
  add({.id = kSlicePtrNode,
       .name = "[]*main.Node",
       .kind = GoKind::Slice,
       .size = 24,
       .elem = kPtrNode});
  return g;
}

// Limits without the clock: the fake memory is slow, and CI machines are loaded; the test of
// the time budget sets one.
DecodeLimits no_clock(DecodeLimits lim = {}) {
  lim.max_ns = 0;
  return lim;
}

DecodeEnv env_for(const TypeGraph* g, bool swiss = false) {
  DecodeEnv e;
  e.types = g;
  e.rt.swiss_maps = swiss;
  return e;
}

// Memory as words: what was put, and zeros everywhere from `zeros_from` on (a huge
// PROT_READ mapping). Counts what was read.
class WordMemory : public MemoryReader {
 public:
  explicit WordMemory(uint64_t zeros_from = ~0ull) : zeros_from_(zeros_from) {}
  bool read(uint64_t addr, void* buf, size_t n) override {
    ++reads;
    bytes += n;
    auto* out = static_cast<uint8_t*>(buf);
    if (addr >= zeros_from_) {
      auto it = words_.lower_bound(addr & ~7ull);
      if (it == words_.end() || it->first >= addr + n) {
        std::memset(buf, 0, n);
        return true;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t a = addr + i;
      auto it = words_.find(a & ~7ull);
      if (it != words_.end())
        out[i] = static_cast<uint8_t>(it->second >> (8 * (a & 7)));
      else if (a >= zeros_from_)
        out[i] = 0;
      else
        return false;
    }
    return true;
  }
  // Words at an 8-aligned address.
  void put(uint64_t addr, std::initializer_list<uint64_t> words) {
    for (uint64_t w : words) {
      words_[addr] = w;
      addr += 8;
    }
  }
  uint64_t reads = 0, bytes = 0;

 private:
  std::map<uint64_t, uint64_t> words_;
  uint64_t zeros_from_;
};

// Runs `fn` on a thread with a stack of `size` bytes.
void run_on_stack(size_t size, const std::function<void()>& fn) {
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, size);
  pthread_t t;
  auto call = [](void* p) -> void* {
    (*static_cast<const std::function<void()>*>(p))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &a, call, const_cast<std::function<void()>*>(&fn)), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&a);
}

// A list of `n` nodes from `base`, node i {next: node i+1, v: i}.
void put_list(WordMemory& m, uint64_t base, int n) {
  for (int i = 0; i < n; ++i)
    m.put(base + 16 * i, {i + 1 < n ? base + 16 * (i + 1) : 0, static_cast<uint64_t>(i)});
}

// The pointers followed from `v` (a *Node's JSON), and the last pointer object (or the cut
// value where a node should have been).
int list_depth(const json& v, json* last = nullptr) {
  int d = 0;
  const json* p = &v;
  const json* at = p;
  while (p->is_object() && p->contains("elem")) {
    ++d;
    const json& node = (*p)["elem"];
    at = p;
    if (!node.contains("fields")) {
      at = &node;
      break;
    }
    p = &node["fields"][0]["value"];
    at = p;
  }
  if (last) *last = *at;
  return d;
}

TEST(DecodeBudget, ADeepListStopsAtTheDepthCeiling) {
  TypeGraph g = make_graph();
  WordMemory m;
  put_list(m, 0x100000, 20000);
  json got;
  // A stack as large as a sanitizer's frames need: this is about the depth limit, the next
  // test about the stack.
  run_on_stack(256 << 20, [&] {
    // 8000 is refused on the command line; whoever asks the decoder gets the ceiling.
    ValueDecoder d(m, env_for(&g), no_clock({.max_depth = 8000}));
    uint64_t head = 0x100000;
    got = d.decode(kPtrNode, {reinterpret_cast<uint8_t*>(&head), 8});
  });
  json last;
  EXPECT_EQ(list_depth(got, &last), kMaxDepthCeiling);
  // Past the depth the pointer keeps its address, as at any --max-depth.
  EXPECT_TRUE(last.contains("addr")) << last.dump();
  EXPECT_FALSE(last.contains("elem"));
}

// The same list on a thread whose stack is far smaller than the ceiling needs: the value is
// cut where the stack would run out, and marked, instead of overflowing it.
TEST(DecodeBudget, ASmallStackCutsADeepListInsteadOfOverflowing) {
  TypeGraph g = make_graph();
  WordMemory m;
  put_list(m, 0x100000, 20000);
  json got;
  bool cut = false;
  run_on_stack(512 << 10, [&] {
    ValueDecoder d(m, env_for(&g), no_clock({.max_depth = kMaxDepthCeiling}));
    uint64_t head = 0x100000;
    got = d.decode(kPtrNode, {reinterpret_cast<uint8_t*>(&head), 8});
    cut = d.budget_cut();
  });
  json last;
  const int depth = list_depth(got, &last);
  EXPECT_GT(depth, 10);
  EXPECT_LT(depth, kMaxDepthCeiling);
  EXPECT_TRUE(cut);
  EXPECT_EQ(last.value("truncated", false), true) << last.dump();
}

TEST(DecodeBudget, ATypeThatContainsItselfIsCut) {
  TypeGraph g = make_graph();
  WordMemory m;
  ValueDecoder d(m, env_for(&g), no_clock());
  uint64_t w = 0;
  json got = d.decode(kSelf, {reinterpret_cast<uint8_t*>(&w), 8});
  int nest = 0;
  const json* p = &got;
  while (p->is_object() && p->contains("fields")) {
    ++nest;
    p = &(*p)["fields"][0]["value"];
  }
  EXPECT_GT(nest, 100);
  EXPECT_EQ(*p, json({{"truncated", true}}));
  EXPECT_TRUE(d.budget_cut());
}

// 10,000 strings that each claim a mebibyte: one event reads its byte budget and no more,
// and allocates no more either; what is past it is marked.
TEST(DecodeBudget, BytesReadPerEventAreBounded) {
  TypeGraph g = make_graph();
  WordMemory m(0x10000000);  // the strings' bytes: zeros
  for (int i = 0; i < 10000; ++i) m.put(0x100000 + 16 * i, {0x10000000, 1 << 20});
  DecodeLimits lim = no_clock({.max_elems = kMaxElemsCeiling, .max_str = kMaxStrCeiling});
  lim.max_read = 3 << 20;
  ValueDecoder d(m, env_for(&g), lim);
  uint64_t s[3] = {0x100000, 10000, 10000};
  json got = d.decode(kSliceString, {reinterpret_cast<uint8_t*>(s), 24});
  EXPECT_LE(m.bytes, lim.max_read);
  EXPECT_TRUE(d.budget_cut());
  EXPECT_EQ(got["truncated"], true);
  ASSERT_GE(got["elems"].size(), 3u);
  ASSERT_TRUE(got["elems"][0].is_string());
  EXPECT_EQ(got["elems"][0].get<std::string>().size(), size_t(1) << 20);
  // The string the budget ended in is cut, and marked so.
  const json& last = got["elems"].back();
  EXPECT_EQ(last["truncated"], true) << last.dump().substr(0, 200);
  EXPECT_FALSE(last.contains("unreadable"));
}

// Reads that take 1 ms each (a tracee under memory pressure, pages swapped out): the event
// ends at its time budget.
TEST(DecodeBudget, TimePerEventIsBounded) {
  class Slow : public WordMemory {
   public:
    bool read(uint64_t addr, void* buf, size_t n) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return WordMemory::read(addr, buf, n);
    }
  };
  TypeGraph g = make_graph();
  Slow m;
  put_list(m, 0x100000, 1000);
  std::vector<uint64_t> ptrs(1000);
  for (int i = 0; i < 1000; ++i) ptrs[i] = 0x100000 + 16 * i;
  for (int i = 0; i < 1000; ++i) m.put(0x900000 + 8 * i, {ptrs[i]});
  DecodeLimits lim{.max_depth = 3, .max_elems = 1000};
  lim.max_ns = 20'000'000;
  ValueDecoder d(m, env_for(&g), lim);
  uint64_t s[3] = {0x900000, 1000, 1000};
  const auto t0 = std::chrono::steady_clock::now();
  d.begin_event();
  json got = d.decode(kSlicePtrNode, {reinterpret_cast<uint8_t*>(s), 24});
  // A second value of the same event starts past the budget, and reads nothing.
  const uint64_t reads = m.reads;
  json second = d.decode(kPtrNode, {reinterpret_cast<uint8_t*>(&ptrs[0]), 8});
  d.end_event();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(ms, 200);  // 20 ms and one read's worth; about 3 s without the budget
  EXPECT_TRUE(d.budget_cut());
  EXPECT_EQ(got["truncated"], true);
  EXPECT_EQ(m.reads, reads);
  EXPECT_EQ(second["truncated"], true) << second.dump();
  // The next event has a budget of its own.
  d.begin_event();
  json third = d.decode(kPtrNode, {reinterpret_cast<uint8_t*>(&ptrs[998]), 8});
  d.end_event();
  EXPECT_FALSE(d.budget_cut());
  EXPECT_EQ(third["elem"]["fields"][1]["value"], 998);
}

TEST(DecodeBudget, TheStopFlagEndsADecode) {
  TypeGraph g = make_graph();
  WordMemory m;
  put_list(m, 0x100000, 100);
  std::atomic<bool> stop{true};
  DecodeEnv env = env_for(&g);
  env.stop = &stop;
  ValueDecoder d(m, env, no_clock({.max_depth = 100}));
  uint64_t head = 0x100000;
  json got = d.decode(kPtrNode, {reinterpret_cast<uint8_t*>(&head), 8});
  EXPECT_EQ(m.reads, 0u);
  EXPECT_EQ(got["truncated"], true) << got.dump();
  stop = false;
  got = d.decode(kPtrNode, {reinterpret_cast<uint8_t*>(&head), 8});
  EXPECT_EQ(list_depth(got), 100);
}

// A swiss map grown to 512 tables of 128 groups and emptied to 3 entries (Go keeps the
// tables): the entries are found, and the groups of the empty tables are not read.
TEST(DecodeBudget, ASparseSwissMapIsReadByItsTablesUsedCounts) {
  TypeGraph g = make_graph();
  WordMemory m(0x40000000);  // every group: ctrl word 0 would be 8 full slots; see below
  constexpr uint64_t kTables = 4096, kGroups = 128, kGroup = 8 + 8 * 16;
  constexpr uint64_t kDir = 0x1000000, kTab = 0x2000000, kData = 0x40000000;
  std::vector<uint64_t> dir(kTables);
  // The entries live in tables 100, 2000 and 4095, in their last group.
  const std::map<uint64_t, std::pair<uint64_t, uint64_t>> live = {
      {100, {7, 70}}, {2000, {11, 110}}, {4095, {13, 130}}};
  for (uint64_t t = 0; t < kTables; ++t) {
    dir[t] = kTab + 32 * t;
    const uint64_t data = kData + t * kGroups * kGroup;
    m.put(dir[t], {live.count(t) ? 1u : 0u, 0, data, kGroups - 1});
    if (!live.count(t)) continue;
    // Every group empty (0x80 per ctrl byte) but the last, whose slot 5 is full.
    for (uint64_t gi = 0; gi + 1 < kGroups; ++gi) m.put(data + gi * kGroup, {0x8080808080808080});
    const uint64_t last = data + (kGroups - 1) * kGroup;
    m.put(last, {0x8080008080808080});
    m.put(last + 8 + 5 * 16, {live.at(t).first, live.at(t).second});
  }
  for (uint64_t t = 0; t < kTables; ++t) m.put(kDir + 8 * t, {dir[t]});
  m.put(0x7000, {3, 0, kDir, kTables, 0});
  ValueDecoder d(m, env_for(&g, true), no_clock());
  uint64_t ptr = 0x7000;
  json got = d.decode(kMapIntInt, {reinterpret_cast<uint8_t*>(&ptr), 8});
  EXPECT_EQ(got["len"], 3);
  EXPECT_EQ(got["entries"], json::parse("[[7,70],[11,110],[13,130]]")) << got.dump();
  EXPECT_FALSE(got.contains("truncated"));
  // The directory, a table header each, and the groups of the three tables with entries.
  EXPECT_LE(m.bytes, 80 + 8 * kTables + 32 * kTables + 3 * kGroups * kGroup + 256);
}

// An hmap of 2^16 buckets emptied to 3 entries: the buckets are read a run at a time, those
// whose first cell is emptyRest no further (no overflow pointer), and the walk ends once
// `count` entries were found.
TEST(DecodeBudget, ASparseBucketMapSkipsEmptyBucketsAndStopsAtItsCount) {
  TypeGraph g = make_graph();
  constexpr uint64_t kBuckets = 0x40000000, kBucket = 8 + 64 + 64 + 8, kB = 16;
  WordMemory m(kBuckets);  // zeros: tophash emptyRest everywhere
  const std::map<uint64_t, std::pair<uint64_t, uint64_t>> live = {
      {5, {1, 10}}, {30000, {2, 20}}, {60000, {3, 30}}};
  for (auto [bi, kv] : live) {
    const uint64_t ba = kBuckets + bi * kBucket;
    m.put(ba, {0x0000000000000901});  // cell 0 emptyOne, cell 1 live (tophash 9)
    m.put(ba + 8 + 8, {kv.first});
    m.put(ba + 8 + 64 + 8, {kv.second});
  }
  uint8_t hdr[48] = {};
  uint64_t count = 3, buckets = kBuckets;
  std::memcpy(hdr, &count, 8);
  hdr[9] = kB;
  std::memcpy(hdr + 16, &buckets, 8);
  uint64_t words[6];
  std::memcpy(words, hdr, 48);
  m.put(0x7000, {words[0], words[1], words[2], words[3], words[4], words[5]});
  ValueDecoder d(m, env_for(&g), no_clock());
  uint64_t ptr = 0x7000;
  json got = d.decode(kMapIntInt, {reinterpret_cast<uint8_t*>(&ptr), 8});
  EXPECT_EQ(got["entries"], json::parse("[[1,10],[2,20],[3,30]]")) << got.dump();
  EXPECT_FALSE(got.contains("truncated"));
  // The buckets up to the last entry's (in 64 KiB runs), the header, the entries.
  EXPECT_LE(m.bytes, kBucket * 60000 + (64 << 10) + 80 + 3 * 16);
}

}  // namespace
}  // namespace gotap
