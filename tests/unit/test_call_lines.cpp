// The writers' typed path for call events (EventSink::emit_entry and friends) against the
// JSON path it replaces, kept as the oracle: emit(to_event(x)) through the same sink must give
// the same bytes, for text and JSON Lines, with and without the --max-line cap, over a table
// of hand-made events and many random ones (escapes, invalid UTF-8, huge numbers, nested
// values, stacks, inlined entries, missing durations).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/events/typed_events.h"
#include "core/output/line_cap.h"
#include "core/output/output_views.h"
#include "core/output/value_text.h"
#include "core/output/writers.h"

namespace gotap {
namespace {

using Call = std::variant<CallEntry, CallReturn, CallUnfinished, FuncCount>;

// What `make` writes for `calls`, each sent typed or as its JSON object.
std::string render(const std::function<std::unique_ptr<EventSink>(std::FILE*)>& make,
                   const std::vector<Call>& calls, bool typed) {
  char* buf = nullptr;
  size_t n = 0;
  std::FILE* f = open_memstream(&buf, &n);
  {
    auto sink = make(f);
    for (const auto& c : calls) {
      if (const auto* e = std::get_if<CallEntry>(&c))
        typed ? sink->emit_entry(*e) : sink->emit(to_event(*e));
      else if (const auto* r = std::get_if<CallReturn>(&c))
        typed ? sink->emit_return(*r) : sink->emit(to_event(*r));
      else if (const auto* u = std::get_if<CallUnfinished>(&c))
        typed ? sink->emit_unfinished(*u) : sink->emit(to_event(*u));
      else
        sink->emit(to_event(std::get<FuncCount>(c)));  // held rows the next call line prints
    }
    sink->flush();
  }
  std::fclose(f);
  std::string out(buf, n);
  std::free(buf);
  return out;
}

struct Chain {
  std::string name;
  std::function<std::unique_ptr<EventSink>(std::FILE*)> make;
};

std::vector<Chain> chains() {
  std::vector<Chain> out = {{"json", [](std::FILE* f) { return make_json_lines_writer(f); }},
                            {"text", [](std::FILE* f) { return make_text_writer(f); }},
                            {"tee", [](std::FILE* f) {
                               return make_tee(make_text_writer(f), make_json_lines_writer(f));
                             }}};
  for (size_t max :
       {size_t{1}, size_t{64}, size_t{300}, size_t{700}, size_t{2000}, kDefaultMaxLine}) {
    out.push_back({"json cap " + std::to_string(max),
                   [max](std::FILE* f) { return make_line_cap(make_json_lines_writer(f), max); }});
    out.push_back({"text cap " + std::to_string(max),
                   [max](std::FILE* f) { return make_line_cap(make_text_writer(f), max); }});
  }
  return out;
}

void expect_same(const std::vector<Call>& calls, const std::string& what) {
  for (const auto& c : chains()) {
    const std::string oracle = render(c.make, calls, false);
    const std::string typed = render(c.make, calls, true);
    ASSERT_EQ(typed, oracle) << what << " through " << c.name;
  }
}

CallSite site(uint64_t ts, std::string func, int64_t goid = 7, int tid = 100) {
  return CallSite{ts, 42, tid, goid, std::move(func)};
}

Event struct_value() {
  return {{"fields",
           {{{"name", "A"}, {"value", 1}},
            {{"name", "S"}, {"value", {{"str", "cut\n"}, {"len", 100}, {"truncated", true}}}},
            {{"name", "P"},
             {"value", {{"addr", "0xc000010000"}, {"elem", {{"fields", Event::array()}}}}}}}}};
}

TEST(CallLines, TableOfEventsSameAsTheJsonPath) {
  CallEntry plain{site(1000, "main.work")};
  plain.args = {{"n", "int", 3}, {"s", "string", "a\"b\\c\td\x01"}};
  CallEntry inl{site(2000, "main.inner")};
  inl.inlined = true;
  inl.inlined_in = "main.outer";
  CallEntry inl_bare{site(2500, "main.inner")};
  inl_bare.inlined = true;
  CallEntry stacked{site(3000, "main.(*T).M\xff\"q")};
  stacked.args = {{"...", "", nullptr},
                  {"~r0", "int", -1},
                  {"", "uint64", std::numeric_limits<uint64_t>::max()}};
  stacked.stack = Event::array({"main.a", "runtime.goexit", Event{{"pc", "0x1"}}});
  CallEntry weird_stack{site(3100, "f")};
  weird_stack.stack = Event{{"not", "an array"}};
  CallReturn ret{site(4000, "main.work")};
  ret.duration_ns = 123456;
  ret.wall_ns = 200000;
  ret.results = {{"~r0", "error", nullptr}, {"v", "T", struct_value()}};
  CallReturn unmatched{site(5000, "main.work", -5, 0)};
  unmatched.results = {{"~r0", "float64", 1.5e300}};
  CallReturn long_one{site(6000, "main.slow")};
  long_one.duration_ns = 12'000'000'000ull;
  long_one.stack = Event::array({"main.caller"});
  CallReturn no_results{site(6500, "main.void")};
  no_results.duration_ns = 9;
  CallUnfinished unf{site(7000, "main.hang"), 900};
  CallUnfinished maybe_lost{site(7500, "main.hang"), 950};
  maybe_lost.reason = "no return seen: the ring lost 3 records, which may hold it\x01\"";
  CallEntry early{site(10, "main.before")};  // before t0: shown at 0
  FuncCount cnt{"main.work", 3, 1};
  const std::vector<Call> calls = {plain,      inl, inl_bare,  stacked,  weird_stack,
                                   ret,        cnt, unmatched, long_one, no_results,
                                   maybe_lost, unf, early};
  expect_same(calls, "table");
  for (const auto& c : calls) expect_same({c}, "one event");
}

TEST(CallLines, BigValuesAreCutTheSameWay) {
  CallEntry big{site(1, "main.big")};
  Event elems = Event::array();
  for (int i = 0; i < 5000; ++i) elems.push_back(i);
  big.args = {{"xs", "[]int", {{"len", 5000}, {"elems", elems}}},
              {"s", "string", std::string(40000, 'x')}};
  CallReturn bigr{site(2, "main.big")};
  bigr.duration_ns = 1;
  bigr.results = {{"m", "map[string]int", {{"len", 3000}, {"entries", Event::array()}}}};
  for (int i = 0; i < 3000; ++i)
    bigr.results[0].value["entries"].push_back(Event::array({std::to_string(i), i}));
  expect_same({big, bigr}, "big");
}

// A random string: printable text, escapes, control bytes, valid and invalid UTF-8.
std::string random_string(std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {"a",
                                                  "Z",
                                                  "main.",
                                                  "(*T)",
                                                  " ",
                                                  "\"",
                                                  "\\",
                                                  "\n",
                                                  "\t",
                                                  "\r",
                                                  "\x01",
                                                  "\x1b[31m",
                                                  "\x7f",
                                                  "\xc3\xa9",
                                                  "\xe2\x80\xa8",
                                                  "\xf0\x9f\x98\x80",
                                                  "\xc2\x85",
                                                  "\xff",
                                                  "\xc3",
                                                  "\xed\xa0\x80",
                                                  "~r0",
                                                  "...",
                                                  "/",
                                                  "{}",
                                                  ":"};
  std::string s;
  const size_t n = rng() % 8;
  for (size_t i = 0; i < n; ++i) s += pieces[rng() % pieces.size()];
  return s;
}

// A number at an edge: the limits of every width, -0, NaN, infinities, subnormals.
Event edge_number(std::mt19937_64& rng) {
  using L64 = std::numeric_limits<int64_t>;
  using U64 = std::numeric_limits<uint64_t>;
  using D = std::numeric_limits<double>;
  switch (rng() % 16) {
    case 0:
      return L64::min();
    case 1:
      return L64::max();
    case 2:
      return U64::max();
    case 3:
      return int64_t{0};
    case 4:
      return -0.0;
    case 5:
      return D::quiet_NaN();
    case 6:
      return D::infinity();
    case 7:
      return -D::infinity();
    case 8:
      return D::denorm_min();
    case 9:
      return D::max();
    case 10:
      return -D::min();
    case 11:
      return static_cast<double>(static_cast<float>(rng() % 100000) / 7.0f);  // a float32
    case 12:
      return static_cast<int64_t>(std::numeric_limits<int32_t>::min());
    case 13:
      return uint64_t{std::numeric_limits<uint32_t>::max()};
    case 14: {
      double d;
      uint64_t bits = rng();
      std::memcpy(&d, &bits, sizeof d);  // any bit pattern
      return d;
    }
    default:
      return static_cast<double>(static_cast<int64_t>(rng() % 2000) - 1000);  // 3.0 and such
  }
}

// One of the marked shapes the value decoder makes (docs/json.md's Values table).
Event marked_value(std::mt19937_64& rng, int depth);

Event random_value(std::mt19937_64& rng, int depth) {
  const int pick = static_cast<int>(rng() % (depth > 3 ? 9 : 16));
  switch (pick) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng());
    case 3:
      return static_cast<uint64_t>(rng());
    case 4:
      return std::ldexp(static_cast<double>(rng() % 1000) - 500,
                        static_cast<int>(rng() % 200) - 100);
    case 5:
      return random_string(rng);
    case 6:
      return {{"str", random_string(rng)}, {"len", rng() % 100}, {"truncated", true}};
    case 7:
      return edge_number(rng);
    case 8:
      return marked_value(rng, depth);
    case 9: {
      Event a = Event::array();
      for (size_t i = rng() % 5; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    case 10: {
      Event f = Event::array();
      for (size_t i = rng() % 4; i > 0; --i)
        f.push_back({{"name", random_string(rng)}, {"value", random_value(rng, depth + 1)}});
      return {{"fields", f}};
    }
    case 11: {
      Event e = Event::array();
      for (size_t i = rng() % 4; i > 0; --i)
        e.push_back(Event::array({random_value(rng, depth + 1), random_value(rng, depth + 1)}));
      return {{"len", rng() % 10}, {"entries", e}};
    }
    case 12:
      return {{"addr", "0xc0000" + std::to_string(rng() % 1000)},
              {"elem", random_value(rng, depth + 1)}};
    case 13:
      return {{"type", random_string(rng)}, {"value", random_value(rng, depth + 1)}};
    case 14:
      return {{"bytes", "00ff41"}, {"len", rng() % 9}};
    default: {
      Event o = Event::object();
      for (size_t i = rng() % 3; i > 0; --i) o[random_string(rng)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

Event marked_value(std::mt19937_64& rng, int depth) {
  switch (rng() % 16) {
    case 0:
      return {{"duration", "1h2m3.5s"}, {"ns", static_cast<int64_t>(rng())}};
    case 1:
      return {{"fields", Event::array()},
              {"time", "2026-11-25 10:00:00 +0000 UTC"},
              {"time_location_unread", rng() % 2 == 0}};
    case 2:
      return {{"raw", Event::array()}, {"location", "unknown"}};
    case 3:
      return {{"raw", Event::array({"0x1", "0xc000012345"})}};
    case 4:
      return {{"unreadable", true}};
    case 5:
      return {{"addr", "0xc000010000"}, {"unreadable", true}};
    case 6:
      return {{"addr", "0xc000010000"}};  // a pointer not followed
    case 7: {                             // an error: an interface with its dynamic type
      Event field = {{"name", "s"}, {"value", "boom"}};
      Event elem = {{"fields", Event::array({field})}};
      Event ptr = {{"addr", "0xc000014070"}, {"elem", elem}};
      return {{"type", "*errors.errorString"}, {"value", ptr}};
    }
    case 8:
      return {{"type", ""}, {"raw", Event::array({"0x0", "0x1"})}};  // no dynamic type read
    case 9:
      return {{"str", ""}, {"len", -1}, {"truncated", true}, {"unreadable", rng() % 2 == 0}};
    case 10:
      return {{"len", rng() % 100}, {"cap", rng() % 100}, {"bytes", "41\n"}, {"truncated", true}};
    case 11:
      return {{"addr", "0xc000020000"}, {"len", rng() % 4}, {"cap", 4}};  // a channel
    case 12:
      return {{"addr", "0x4a1b20"}, {"func", "main.handler.func1"}};
    case 13:
      return {{"real", edge_number(rng)}, {"imag", edge_number(rng)}};
    case 14:
      return {{"len", rng() % 40},
              {"elems", Event::array({random_value(rng, depth + 1)})},
              {"truncated", true}};
    default:
      return {{"truncated", true}};  // a value the line cap left out
  }
}

std::vector<Param> random_params(std::mt19937_64& rng) {
  std::vector<Param> ps;
  for (size_t i = rng() % 5; i > 0; --i)
    ps.push_back({random_string(rng), random_string(rng), random_value(rng, 0)});
  return ps;
}

std::optional<Event> random_stack(std::mt19937_64& rng) {
  if (rng() % 3) return std::nullopt;
  if (rng() % 5 == 0) return random_value(rng, 2);
  Event a = Event::array();
  for (size_t i = rng() % 4; i > 0; --i)
    a.push_back(rng() % 4 ? Event(random_string(rng)) : random_value(rng, 2));
  return a;
}

Call random_call(std::mt19937_64& rng) {
  const uint64_t ts = rng() % 4 == 0 ? rng() : 1'000'000'000 + rng() % 100'000'000'000ull;
  const int64_t goid =
      rng() % 8 == 0 ? static_cast<int64_t>(rng()) : static_cast<int64_t>(rng() % 100);
  const int tid = static_cast<int>(rng() % 5 == 0 ? rng() : rng() % 100000);
  CallSite s{ts, static_cast<int>(rng()), tid, goid, random_string(rng)};
  switch (rng() % 7) {
    case 0:
    case 1:
    case 2: {
      CallEntry e{s};
      e.args = random_params(rng);
      e.stack = random_stack(rng);
      if (rng() % 4 == 0) {
        e.inlined = true;
        if (rng() % 2) e.inlined_in = random_string(rng);
      }
      return e;
    }
    case 3:
    case 4:
    case 5: {
      CallReturn r{s};
      r.results = random_params(rng);
      r.stack = random_stack(rng);
      if (rng() % 4) r.duration_ns = rng() % 4 == 0 ? rng() : rng() % 100'000'000;
      if (rng() % 3) r.wall_ns = rng();
      return r;
    }
    default:
      if (rng() % 3 == 0) return FuncCount{random_string(rng), rng() % 1000, std::nullopt};
      if (rng() % 2) return CallUnfinished{s, rng()};
      CallUnfinished u{s, rng()};
      u.reason = random_string(rng);
      return u;
  }
}

TEST(CallLines, RandomEventsSameAsTheJsonPath) {
  std::mt19937_64 rng(22);
  for (int round = 0; round < 300; ++round) {
    std::vector<Call> calls;
    for (size_t i = 1 + rng() % 6; i > 0; --i) calls.push_back(random_call(rng));
    expect_same(calls, "round " + std::to_string(round));
    if (HasFatalFailure()) return;
  }
}

// What the JSON writer makes of `c`, typed or through its object (nlohmann's dump per key).
std::string json_of(const Call& c, bool typed) {
  return render([](std::FILE* f) { return make_json_lines_writer(f); }, {c}, typed);
}

// The JSON Lines writer's values, names and ids, written in place on the typed path, against
// nlohmann's dump of to_event (the oracle: emit(to_event(x)), invalid UTF-8 replaced): one
// random value of every kind (numbers at every limit, -0, NaN, infinities, denormals, any
// double's bits, strings with escapes, control bytes and invalid UTF-8, marked shapes) as an
// entry's argument and a return's result, byte for byte.
TEST(JsonFastPaths, ValuesAsTheSerializer) {
  std::mt19937_64 rng(2215);
  for (int i = 0; i < 20000; ++i) {
    const Event v = i % 4 == 0   ? edge_number(rng)
                    : i % 4 == 1 ? marked_value(rng, 0)
                    : i % 4 == 2 ? Event(random_string(rng))
                                 : random_value(rng, 0);
    const CallSite s{rng(), static_cast<int>(rng()), static_cast<int>(rng()),
                     static_cast<int64_t>(rng()), random_string(rng)};
    CallEntry e{s};
    e.args = {{random_string(rng), random_string(rng), v}};
    ASSERT_EQ(json_of(e, true), json_of(e, false))
        << v.dump(-1, ' ', false, Event::error_handler_t::replace);
    CallReturn r{s};
    r.results = {{random_string(rng), random_string(rng), v}, {"~r1", "int", v}};
    r.duration_ns = rng();
    ASSERT_EQ(json_of(r, true), json_of(r, false));
  }
  // The scalars at their limits, one by one.
  for (const Event& v :
       {Event(nullptr), Event(true), Event(false), Event(std::numeric_limits<int64_t>::min()),
        Event(std::numeric_limits<int64_t>::max()), Event(std::numeric_limits<uint64_t>::max()),
        Event(int64_t{0}), Event(uint64_t{0}), Event(""), Event("plain"), Event("\x7f"),
        Event("a\"b"), Event("\xff\xc3"), Event(-0.0), Event(5e-324)}) {
    CallEntry e{CallSite{1, 2, 3, 4, "main.f"}};
    e.args = {{"x", "T", v}};
    ASSERT_EQ(json_of(e, true), json_of(e, false))
        << v.dump(-1, ' ', false, Event::error_handler_t::replace);
  }
}

// The text writer's pieces, each against what it replaces on the typed path: value_to_text,
// printable, format_duration and fmt's "{:>13.6f}" and "{:>8}", byte for byte.
TEST(TextFastPaths, ValuesAsValueToText) {
  std::mt19937_64 rng(2211);
  for (int i = 0; i < 20000; ++i) {
    const Event v = i % 3 == 0   ? edge_number(rng)
                    : i % 3 == 1 ? marked_value(rng, 0)
                                 : random_value(rng, 0);
    std::string out = "x=";  // appended after what is there
    append_value_text(out, v);
    ASSERT_EQ(out, "x=" + value_to_text(v))
        << v.dump(-1, ' ', false, Event::error_handler_t::replace);
  }
}

TEST(TextFastPaths, NamesAsPrintable) {
  std::mt19937_64 rng(2212);
  for (int i = 0; i < 20000; ++i) {
    const std::string s = random_string(rng);
    std::string out = "<- ";
    append_printable(out, s);
    ASSERT_EQ(out, "<- " + printable(s)) << quote_go_string(s);
    std::string q = "(";
    append_quoted(q, s);
    ASSERT_EQ(q, "(" + quote_go_string(s));
  }
  // The escapes themselves, as Go's %q writes them (hex digits now written by hand).
  EXPECT_EQ(quote_go_string("\x01\x1b\x7f\xff\xc3"), R"("\x01\x1b\x7f\xff\xc3")");
  EXPECT_EQ(quote_go_string("\xc2\x85\xe2\x80\xa8\xe2\x80\xa9"), R"("\u0085\u2028\u2029")");
  // A surrogate and an overlong form are invalid UTF-8 to Go: each byte escaped.
  EXPECT_EQ(quote_go_string("\xed\xa0\x80"), R"("\xed\xa0\x80")");
  EXPECT_EQ(quote_go_string("\xf0\x80\x82\x85"), R"("\xf0\x80\x82\x85")");
  EXPECT_EQ(quote_go_string("\xc3\xa9\xf0\x9f\x98\x80"), "\"\xc3\xa9\xf0\x9f\x98\x80\"");
  EXPECT_EQ(printable("main.(*T).M"), "main.(*T).M");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(printable("a\"b"), R"("a\"b")");
}

// ns values near every rounding edge: ties, powers of ten, the limits of a double's precision.
std::vector<uint64_t> edge_ns(std::mt19937_64& rng) {
  std::vector<uint64_t> out = {0,
                               1,
                               499,
                               500,
                               501,
                               999,
                               1000,
                               1499,
                               1500,
                               1501,
                               9999,
                               10000,
                               std::numeric_limits<uint64_t>::max(),
                               (1ull << 53) - 1,
                               1ull << 53,
                               (1ull << 53) + 1,
                               999'999'999'999'999ull,
                               1'000'000'000'000'000ull,
                               9'999'999'500ull,
                               9'999'999'499ull};
  for (uint64_t p = 1; p && p < std::numeric_limits<uint64_t>::max() / 10; p *= 10)
    for (int64_t d : {-501, -500, -499, -1, 0, 1, 499, 500, 501, 500'000, 499'999})
      out.push_back(p + static_cast<uint64_t>(d));
  for (int i = 0; i < 200000; ++i) {
    const uint64_t r = rng();
    switch (i % 5) {
      case 0:
        out.push_back(r);
        break;
      case 1:
        out.push_back(r >> (r % 64));  // every magnitude
        break;
      case 2:
        out.push_back((r >> (r % 64)) / 1000 * 1000 + 500);  // a tie for the microseconds
        break;
      case 3:
        out.push_back((r >> (r % 64)) / 1'000'000 * 1'000'000 + 500'000);  // for ms
        break;
      default:
        out.push_back(r % 100'000'000'000ull);  // what a trace's clock shows
    }
  }
  return out;
}

TEST(TextFastPaths, TimeColumnAndDurationsAsFmt) {
  std::mt19937_64 rng(2213);
  for (uint64_t ns : edge_ns(rng)) {
    std::string t = "|";
    append_seconds(t, ns);
    ASSERT_EQ(t, "|" + fmt::format("{:>13.6f}", ns / 1e9)) << ns;
    std::string d = "(";
    append_duration(d, ns);
    ASSERT_EQ(d, "(" + format_duration(ns)) << ns;
  }
}

TEST(TextFastPaths, IdColumnsAsFmt) {
  std::mt19937_64 rng(2214);
  std::vector<int64_t> vs = {0,
                             -1,
                             1,
                             9'999'999,
                             10'000'000,
                             99'999'999,
                             100'000'000,
                             -9'999'999,
                             std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max()};
  for (int i = 0; i < 20000; ++i) {
    const uint64_t r = rng();
    vs.push_back(static_cast<int64_t>(r >> (r % 64)) * (r % 2 ? 1 : -1));
  }
  for (int64_t v : vs) {
    std::string out = " ";
    append_int_right(out, v, 8);
    ASSERT_EQ(out, " " + fmt::format("{:>8}", v)) << v;
  }
}

}  // namespace
}  // namespace gotap
