// The writers' typed path for call events (EventSink::emit_entry and friends) against the
// JSON path it replaces, kept as the oracle: emit(to_event(x)) through the same sink must give
// the same bytes, for text and JSON Lines, with and without the --max-line cap, over a table
// of hand-made events and many random ones (escapes, invalid UTF-8, huge numbers, nested
// values, stacks, inlined entries, missing durations).
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "core/events/typed_events.h"
#include "core/output/line_cap.h"
#include "core/output/output_views.h"
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
  CallEntry early{site(10, "main.before")};  // before t0: shown at 0
  FuncCount cnt{"main.work", 3, 1};
  const std::vector<Call> calls = {plain, inl,       inl_bare, stacked,    weird_stack, ret,
                                   cnt,   unmatched, long_one, no_results, unf,         early};
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

Event random_value(std::mt19937_64& rng, int depth) {
  const int pick = static_cast<int>(rng() % (depth > 3 ? 7 : 14));
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
    case 7: {
      Event a = Event::array();
      for (size_t i = rng() % 5; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    case 8: {
      Event f = Event::array();
      for (size_t i = rng() % 4; i > 0; --i)
        f.push_back({{"name", random_string(rng)}, {"value", random_value(rng, depth + 1)}});
      return {{"fields", f}};
    }
    case 9: {
      Event e = Event::array();
      for (size_t i = rng() % 4; i > 0; --i)
        e.push_back(Event::array({random_value(rng, depth + 1), random_value(rng, depth + 1)}));
      return {{"len", rng() % 10}, {"entries", e}};
    }
    case 10:
      return {{"addr", "0xc0000" + std::to_string(rng() % 1000)},
              {"elem", random_value(rng, depth + 1)}};
    case 11:
      return {{"type", random_string(rng)}, {"value", random_value(rng, depth + 1)}};
    case 12:
      return {{"bytes", "00ff41"}, {"len", rng() % 9}};
    default: {
      Event o = Event::object();
      for (size_t i = rng() % 3; i > 0; --i) o[random_string(rng)] = random_value(rng, depth + 1);
      return o;
    }
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
      return CallUnfinished{s, rng()};
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

}  // namespace
}  // namespace gotap
