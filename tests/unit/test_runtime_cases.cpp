// Declarative runtime tests (tests/cases/*.json, one case a file; see tests/cases/README.md).
// A case names a fixture, a gotap command and expectations about the events, drawn from the
// ground truth the fixture prints. This runner finds every case file, runs each case once per
// backend (RuntimeCase, test name <case>_<backend>) on every built fixture binary it selects,
// and compares the two backends' events for the same case (RuntimeParity, test name <case>).
//
// A case file:
//
//   {
//     "description": "what the case shows",
//     "fixture": "methods",                  // a program of tests/fixtures/
//     "flavours": ["stripped"],              // optional; default every built flavour
//     "go_versions": ["1.22", "1.26"],       // optional; default every built Go version
//     "command": ["trace", "--json", "main.(*memStore).Put"],   // "--backend B" goes after [0]
//     "argv": [],                            // the fixture's arguments (after "--" BINARY)
//     "backends": ["ptrace", "ebpf"],        // optional; default both; "trampoline" runs
//                                            // only the fixtures of Go 1.17 and later
//     "timeout_s": 120,                      // optional; per gotap run
//     "expect": { ... },                     // what every backend must show
//     "per_backend": {"ebpf": { ... }},      // optional; merged (JSON merge patch) into
//                                            // "expect" for that backend
//     "parity": true                         // optional; false: no parity check;
//                                            // {"min_compared": N, "same_counts": false}:
//                                            // see README
//   }
//
// Expectations ("expect"), each optional; tests/cases/README.md describes each:
//   "exit_code", "no_unfinished", "event_counts", "min_event_counts", "each_event",
//   "summary", "calls_match_ground_truth", "may_be_incomplete",
//   "latency_matches_ground_truth", "unfinished_match_entries",
//   "inlined_match_ground_truth", "inlined_counts_match_ground_truth",
//   "goroutines_match_ground_truth", "durations_within_ground_truth";
//   "attempts": N runs of each fixture, the case passing when one run meets every
//   expectation (for expectations a loaded host can miss; the case's file says why).
// Ground truth is what the fixture prints: {"gt":...} JSON lines, or "gt KIND key=value ..."
// text lines read as {"gt": KIND, key: value, ...}.
//
// Parity (per case and fixture binary, both backends; runs are shared with RuntimeCase when
// both run in one process): the same event kinds with the same number of events each (for
// gstate, the same number of goroutines and the same stable state changes of the program's
// own goroutines: stable_transitions); the same keys per kind (for `summary`, the
// contract's keys, and equal ended_by, lost, exit_code, functions, probes and events); per
// function the same entries and returns, with args and results of the same names and types,
// and equal values wherever both backends captured them completely ("addr" keys left out,
// map entries compared as sets); the same inlined sites, unfinished calls on the same
// goroutines, and latency counting as many calls in the same bucket scheme.
//
// A case that lists "trampoline" too is compared the same way between eBPF and the
// trampoline backend (RuntimeParity, test name <case>_trampoline), on the fixtures both run.
//
// Cases need root (ptrace and BPF) and skip without it; a case whose fixtures are not built
// skips with the reason.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string> kBackends = {"ptrace", "ebpf"};

std::string cases_dir() {
  if (const char* e = std::getenv("GOTAP_CASES_DIR")) return e;
  return std::string(GOTAP_SOURCE_DIR) + "/tests/cases";
}

struct Case {
  std::string name;   // the file's stem: "methods-stripped"
  std::string file;   // its path
  std::string error;  // why it could not be loaded ("" when it was)
  json doc;

  std::vector<std::string> strings(const char* key) const {
    std::vector<std::string> out;
    if (doc.contains(key))
      for (const auto& s : doc[key]) out.push_back(s.get<std::string>());
    return out;
  }
  std::vector<std::string> backends() const {
    auto b = strings("backends");
    return b.empty() ? kBackends : b;
  }
  // The expectations for one backend: "expect" with "per_backend"[backend] merged in.
  json expect(const std::string& backend) const {
    json e = doc.value("expect", json::object());
    if (doc.contains("per_backend") && doc["per_backend"].contains(backend))
      e.merge_patch(doc["per_backend"][backend]);
    return e;
  }
  // The built fixture binaries the case selects; for "trampoline", those of Go 1.17 and
  // later (its records read g from R14, the register ABI's).
  std::vector<Fixture> fixtures(const std::string& backend = "") const {
    auto flavours = strings("flavours"), versions = strings("go_versions");
    auto wanted = [](const std::vector<std::string>& set, const std::string& v) {
      return set.empty() || std::find(set.begin(), set.end(), v) != set.end();
    };
    auto runs = [&](const Fixture& f) { return backend != "trampoline" || f.go_at_least(17); };
    std::vector<Fixture> out;
    for (auto& f : all_fixtures(doc.value("fixture", "")))
      if (wanted(flavours, f.flavour) && wanted(versions, f.go_version) && runs(f))
        out.push_back(f);
    return out;
  }
};

std::vector<Case> load_cases() {
  std::vector<Case> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cases_dir(), ec)) {
    if (e.path().extension() != ".json") continue;
    Case c{e.path().stem().string(), e.path().string(), "", json()};
    c.doc = json::parse(read_file(c.file), nullptr, false);
    if (c.doc.is_discarded() || !c.doc.is_object())
      c.error = "not a JSON object";
    else if (!c.doc.contains("fixture") || !c.doc.contains("command") ||
             !c.doc["command"].is_array() || c.doc["command"].empty())
      c.error = "needs \"fixture\" and a non-empty \"command\"";
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return out;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = load_cases();
  return cases;
}

const Case& case_named(const std::string& name) {
  for (const auto& c : all_cases())
    if (c.name == name) return c;
  static const Case none{name, "", "no such case", json()};
  return none;
}

// A gtest name: letters, digits and '_'.
std::string ident(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// One run of a case's command on one fixture binary under one backend.
struct CaseRun {
  std::string binary;  // the fixture binary traced
  std::string mode;    // gotap's subcommand: trace, count, latency...
  RunResult result;
  std::vector<json> events;  // gotap's events, in output order
  std::vector<json> gt;      // the fixture's ground-truth lines
};

// A ground-truth line in text, "gt KIND key=value ...", as {"gt": KIND, key: value, ...}
// (values that are whole numbers as numbers; KIND "" when the first word is a key=value).
json text_ground_truth(const std::string& line) {
  json j = {{"gt", ""}};
  std::istringstream words(line.substr(3));
  bool first = true;
  for (std::string w; words >> w; first = false) {
    const auto eq = w.find('=');
    if (eq == std::string::npos) {
      if (first) j["gt"] = w;
      continue;
    }
    const std::string k = w.substr(0, eq), v = w.substr(eq + 1);
    const bool number = !v.empty() && v.size() < 19 &&
                        std::all_of(v.begin() + (v[0] == '-'), v.end(), ::isdigit) && v != "-";
    if (number)
      j[k] = std::stoll(v);
    else
      j[k] = v;
  }
  return j;
}

// `fresh`: run again, replacing the kept run (a case's next attempt).
const CaseRun& run_case(const Case& c, const Fixture& f, const std::string& backend,
                        bool fresh = false) {
  static std::map<std::string, CaseRun> cache;
  const std::string key = c.name + "|" + f.path + "|" + backend;
  if (auto it = cache.find(key); it != cache.end() && !fresh) return it->second;
  std::vector<std::string> argv = {gotap_binary()};
  for (size_t i = 0; i < c.doc["command"].size(); ++i) {
    argv.push_back(c.doc["command"][i].get<std::string>());
    if (i == 0) argv.insert(argv.end(), {"--backend", backend});
  }
  argv.insert(argv.end(), {"--", f.path});
  for (const auto& a : c.strings("argv")) argv.push_back(a);
  CaseRun r;
  r.binary = f.path;
  r.mode = c.doc["command"][0].get<std::string>();
  r.result = run_command(argv, c.doc.value("timeout_s", 120));
  std::istringstream in(r.result.out);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("gt ", 0) == 0) {
      r.gt.push_back(text_ground_truth(l));
      continue;
    }
    auto j = json::parse(l, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("gt"))
      r.gt.push_back(std::move(j));
    else if (j.contains("event"))
      r.events.push_back(std::move(j));
  }
  return cache[key] = std::move(r);
}

std::vector<json> of_kind(const std::vector<json>& evs, const std::string& kind) {
  std::vector<json> out;
  for (const auto& e : evs)
    if (e.value("event", "") == kind) out.push_back(e);
  return out;
}

// Events of one kind by function, in output order.
std::map<std::string, std::vector<json>> by_func(const std::vector<json>& evs,
                                                 const std::string& kind) {
  std::map<std::string, std::vector<json>> out;
  for (const auto& e : evs)
    if (e.value("event", "") == kind) out[e.value("func", "")].push_back(e);
  return out;
}

// Whether the backend captured all of v: no raw words, no truncation, no pointer left
// unfollowed, no placeholder string. Only gotap's own marks are looked at: a struct's field
// names are data in its "fields" array (docs/json.md), never keys, so a field named "raw",
// "addr" or "truncated" is compared like any other.
bool complete(const json& v) {
  if (v.is_object()) {
    if (v.contains("fields")) {
      if (!v["fields"].is_array()) return false;
      for (const auto& f : v["fields"])
        if (!f.is_object() || !complete(f.value("value", json()))) return false;
      return true;
    }
    // An interface recognised among untyped words keeps those words in "raw" next to its
    // dynamic type and value: complete when the value is.
    if (v.contains("raw") && v.contains("type") && v.contains("value")) return complete(v["value"]);
    if (v.contains("raw") || v.contains("truncated") || v.contains("unreadable")) return false;
    // A pointer without its pointee (a chan's or func's address needs none).
    if (v.contains("addr") && !v.contains("elem") && !v.contains("func") && !v.contains("cap"))
      return false;
    for (const auto& [k, e] : v.items())
      if (!complete(e)) return false;
  } else if (v.is_array()) {
    for (const auto& e : v)
      if (!complete(e)) return false;
  } else if (v.is_string()) {
    return v.get<std::string>().rfind("<not captured", 0) != 0;
  }
  return true;
}

// Compares what the backend captured of `got` with `want`: whole when complete, else field by
// field through structs, pointees and interface payloads, skipping only the parts not
// captured. Counts the values compared whole.
void expect_captured(const json& want, const json& got, const std::string& path, size_t* n) {
  if (complete(got)) {
    expect_contains(want, got, path);
    ++*n;
    return;
  }
  if (!want.is_object() || !got.is_object()) return;
  if (want.contains("fields") && got.contains("fields")) {
    const json &wf = want["fields"], &gf = got["fields"];
    ASSERT_TRUE(wf.is_array() && gf.is_array() && wf.size() == gf.size())
        << path << ": fields " << wf << " vs " << gf;
    for (size_t i = 0; i < wf.size(); ++i) {
      const std::string at = path + "." + wf[i].value("name", "?");
      EXPECT_EQ(gf[i].value("name", ""), wf[i].value("name", "")) << at << " (declaration order)";
      expect_captured(wf[i].value("value", json()), gf[i].value("value", json()), at, n);
    }
    return;
  }
  if (want.contains("elem") && got.contains("elem")) {
    expect_captured(want["elem"], got["elem"], path + ".elem", n);
  } else if (want.contains("type") && got.contains("type") && want.contains("value")) {
    EXPECT_EQ(got["type"], want["type"]) << path << ".type";
    if (got.contains("value")) expect_captured(want["value"], got["value"], path + ".value", n);
  }
}

// v without pointer addresses (they differ from run to run) and with map entries sorted.
// "addr" is a key of gotap's pointer, chan, func and unreadable-memory objects only (struct
// fields are in "fields"), so a field named addr stays.
json normalized(const json& v) {
  if (v.is_array()) {
    json out = json::array();
    for (const auto& e : v) out.push_back(normalized(e));
    return out;
  }
  if (!v.is_object()) return v;
  json out = json::object();
  // A guessed interface's raw words hold addresses too.
  const bool guessed = v.contains("raw") && v.contains("type") && v.contains("value");
  for (const auto& [k, e] : v.items())
    if (k != "addr" && !(guessed && k == "raw")) out[k] = normalized(e);
  if (out.contains("len") && out.contains("entries") && out["entries"].is_array()) {
    std::vector<json> entries(out["entries"].begin(), out["entries"].end());
    std::sort(entries.begin(), entries.end(),
              [](const json& a, const json& b) { return a.dump() < b.dump(); });
    out["entries"] = entries;
  }
  return out;
}

bool skip_reason(const Case& c, std::string* why) {
  if (!c.error.empty()) return false;  // reported as a failure
  if (geteuid() != 0) {
    *why = "needs root (ptrace and BPF)";
    return true;
  }
  if (!file_exists(gotap_binary())) {
    *why = gotap_binary() + " is not built";
    return true;
  }
  if (c.fixtures().empty()) {
    *why = "no " + c.doc.value("fixture", "") + " fixtures built for flavours " +
           json(c.strings("flavours")).dump() + ", Go versions " +
           json(c.strings("go_versions")).dump() + " (tests/tools/build-fixtures.sh)";
    return true;
  }
  return false;
}

// "calls_match_ground_truth" on one run.
void expect_calls_match(const json& spec, const json& incomplete_ok, const CaseRun& run) {
  std::map<std::string, std::vector<json>> gt_calls, gt_rets;
  for (const auto& g : run.gt) {
    if (g["gt"] == "call") gt_calls[g["func"]].push_back(g);
    if (g["gt"] == "return") gt_rets[g["func"]].push_back(g);
  }
  ASSERT_FALSE(gt_calls.empty()) << "no ground truth on stdout:\n" << run.result.out;
  if (spec.contains("funcs")) {
    // Only these functions' ground truth is compared (the fixture may print others'), and
    // each must be in it.
    std::map<std::string, std::vector<json>> calls, rets;
    for (const auto& f : spec["funcs"]) {
      std::string name = f.get<std::string>();
      ASSERT_TRUE(gt_calls.count(name)) << name << " is not in the ground truth";
      calls[name] = gt_calls[name];
      rets[name] = gt_rets[name];
    }
    gt_calls = std::move(calls);
    gt_rets = std::move(rets);
  }
  auto entries = by_func(run.events, "entry"), returns = by_func(run.events, "return");
  for (const auto& [func, calls] : gt_calls) {
    ASSERT_EQ(entries[func].size(), calls.size()) << func << " entries";
    ASSERT_EQ(returns[func].size(), gt_rets[func].size()) << func << " returns";
    for (size_t i = 0; i < returns[func].size() && i < entries[func].size(); ++i) {
      EXPECT_EQ(returns[func][i]["goid"], entries[func][i]["goid"]) << func << "#" << i;
      EXPECT_TRUE(returns[func][i].contains("duration_ns")) << returns[func][i];
    }
  }
  if (!spec.value("values", true)) return;  // only the calls
  const std::string names = spec.value("names", "ground_truth");
  const bool results = spec.value("results", true);
  const bool types = spec.value("types", "ground_truth") == "ground_truth";
  std::set<std::string> must_be_complete;
  if (incomplete_ok.is_object() && incomplete_ok.contains("except_types"))
    for (const auto& t : incomplete_ok["except_types"]) must_be_complete.insert(t);
  size_t compared = 0;
  for (const auto& [func, calls] : gt_calls) {
    std::vector<std::tuple<json, json, std::string>> lists;
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::string at = func + "#" + std::to_string(i);
      lists.emplace_back(calls[i]["args"], entries[func][i]["args"], at + ".arg");
      if (results && i < gt_rets[func].size())
        lists.emplace_back(gt_rets[func][i]["results"], returns[func][i]["results"], at + ".~r");
    }
    for (const auto& [want, got, prefix] : lists) {
      ASSERT_EQ(got.size(), want.size()) << prefix << ": " << got;
      const bool is_result = prefix.ends_with("~r");
      for (size_t k = 0; k < want.size(); ++k) {
        const std::string where = prefix + std::to_string(k);
        if (names == "ground_truth") {
          EXPECT_EQ(got[k]["name"], want[k]["name"]) << where;
        } else if (names == "positional") {
          EXPECT_EQ(got[k]["name"], (is_result ? "~r" : "arg") + std::to_string(k)) << where;
        }
        if (types) EXPECT_EQ(got[k]["type"], want[k]["type"]) << where;
        const json& gv = got[k]["value"];
        if (incomplete_ok.is_object() && !complete(gv)) {
          EXPECT_FALSE(must_be_complete.count(want[k].value("type", "")))
              << where << " (" << want[k]["type"] << ") must be complete: " << gv;
          expect_captured(want[k]["value"], gv, where, &compared);
          continue;
        }
        expect_contains(want[k]["value"], gv, where);
        ++compared;
      }
    }
  }
  // Values are compared, never silently none: at least one unless a case says how many.
  EXPECT_GE(compared, spec.value("min_compared", size_t{1})) << "values compared";
}

// The ground truth's calls per function: every function, or only those of `funcs` (each
// must be in it).
std::map<std::string, size_t> ground_truth_calls(const json& spec, const CaseRun& run) {
  std::map<std::string, size_t> calls;
  for (const auto& g : run.gt)
    if (g["gt"] == "call") ++calls[g["func"]];
  if (!spec.is_object() || !spec.contains("funcs")) return calls;
  std::map<std::string, size_t> only;
  for (const auto& f : spec["funcs"]) {
    const std::string name = f.get<std::string>();
    EXPECT_TRUE(calls.count(name)) << name << " is not in the ground truth";
    only[name] = calls[name];
  }
  return only;
}

// A latency event's buckets: half-open log2 ([0, 2), then [2^k, 2^(k+1))), adding up to its
// count; its percentiles ordered between min and max.
void expect_latency_shape(const json& lat, const std::string& where) {
  uint64_t total = 0;
  for (const auto& b : lat.value("buckets", json::array())) {
    const uint64_t lo = b["lo_ns"], hi = b["hi_ns"];
    EXPECT_EQ(hi, lo ? 2 * lo : 2) << where << ": " << b;
    total += b["count"].get<uint64_t>();
  }
  EXPECT_EQ(total, lat["count"].get<uint64_t>()) << where << " buckets: " << lat;
  EXPECT_LE(lat["min_ns"], lat["p50_ns"]) << where;
  EXPECT_LE(lat["p50_ns"], lat["p99_ns"]) << where;
  EXPECT_LE(lat["p99_ns"], lat["max_ns"]) << where;
}

// "latency_matches_ground_truth": one latency event per function the ground truth calls, as
// many calls counted as it made, and well-formed buckets.
void expect_latency_match(const json& spec, const CaseRun& run) {
  auto calls = ground_truth_calls(spec, run);
  ASSERT_FALSE(calls.empty()) << "no ground truth on stdout:\n" << run.result.out;
  auto lat = by_func(run.events, "latency");
  for (const auto& [func, n] : calls) {
    ASSERT_EQ(lat[func].size(), 1u) << func << " latency events";
    EXPECT_EQ(lat[func][0]["count"], n) << func << ": " << lat[func][0];
    expect_latency_shape(lat[func][0], func);
  }
}

// "durations_within_ground_truth": {"func": F}. The fixture prints, per call of F, the window
// its caller measured around the call on CLOCK_MONOTONIC (gotap's clock):
// "gt window func=F goid=G ms=M start=S end=E", M the least the call lasts. Traced (entry and
// return events): the calls of each goroutine, in order, lie inside their windows (entry at or
// after S, return at or before E) and last between M ms and E - S. Timed (a latency event):
// as many calls, none shorter than the shortest M nor longer than the longest window. Bounds
// on both sides that no load can break: a duration in the wrong bucket fails.
void expect_durations_within(const json& spec, const CaseRun& run) {
  const std::string func = spec.at("func");
  std::map<int64_t, std::vector<json>> windows;  // by goid, in the order they were printed
  size_t total = 0;
  int64_t min_ms = INT64_MAX, max_window = 0;
  for (const auto& g : run.gt)
    if (g.value("gt", "") == "window" && g.value("func", "") == func) {
      windows[g["goid"].get<int64_t>()].push_back(g);
      min_ms = std::min(min_ms, g["ms"].get<int64_t>());
      max_window = std::max(max_window, g["end"].get<int64_t>() - g["start"].get<int64_t>());
      ++total;
    }
  ASSERT_GT(total, 0u) << "no gt window lines for " << func << ":\n" << run.result.out;
  for (auto& [goid, ws] : windows)
    std::sort(ws.begin(), ws.end(), [](const json& a, const json& b) {
      return a["start"].get<int64_t>() < b["start"].get<int64_t>();
    });
  auto lat = by_func(run.events, "latency")[func];
  auto returns = by_func(run.events, "return")[func];
  ASSERT_TRUE(!lat.empty() || !returns.empty()) << "neither calls nor latency of " << func;
  if (!lat.empty()) {
    ASSERT_EQ(lat.size(), 1u);
    EXPECT_EQ(lat[0]["count"].get<size_t>(), total) << lat[0];
    EXPECT_GE(lat[0]["min_ns"].get<int64_t>(), min_ms * 1000000) << lat[0];
    EXPECT_LE(lat[0]["max_ns"].get<int64_t>(), max_window) << lat[0];
  }
  if (returns.empty()) return;
  std::map<int64_t, std::vector<json>> entries_of, returns_of;
  const auto entries = by_func(run.events, "entry")[func];
  for (const auto& e : entries) entries_of[e["goid"].get<int64_t>()].push_back(e);
  for (const auto& r : returns) returns_of[r["goid"].get<int64_t>()].push_back(r);
  size_t checked = 0;
  for (const auto& [goid, ws] : windows) {
    const auto& es = entries_of[goid];
    const auto& rs = returns_of[goid];
    ASSERT_EQ(es.size(), ws.size()) << "entries of goroutine " << goid;
    ASSERT_EQ(rs.size(), ws.size()) << "returns of goroutine " << goid;
    for (size_t i = 0; i < ws.size(); ++i) {
      const int64_t start = ws[i]["start"], end = ws[i]["end"], ms = ws[i]["ms"];
      const int64_t entered = es[i]["ts_ns"], returned = rs[i]["ts_ns"];
      const int64_t dur = rs[i]["duration_ns"];
      SCOPED_TRACE("goroutine " + std::to_string(goid) + " call " + std::to_string(i) + ": " +
                   ws[i].dump() + " " + es[i].dump() + " " + rs[i].dump());
      EXPECT_GE(entered, start);
      EXPECT_LE(returned, end);
      EXPECT_GE(dur, ms * 1000000);
      EXPECT_LE(dur, end - start);
      ++checked;
    }
  }
  EXPECT_EQ(checked, total);
  EXPECT_EQ(returns.size(), total);
}

// "unfinished_match_entries": every unfinished call has the contract's fields, an entry event
// of the same function entered when it says (same goid, pid, tid), no return, and lasted at
// least min_duration_ns (default 0).
void expect_unfinished_match(const json& spec, const CaseRun& run) {
  const uint64_t min_ns = spec.is_object() ? spec.value("min_duration_ns", uint64_t{0}) : 0;
  auto entries = by_func(run.events, "entry"), returns = by_func(run.events, "return");
  for (const auto& u : of_kind(run.events, "unfinished")) {
    bool fields = true;
    for (const char* k : {"ts_ns", "entry_ts_ns", "pid", "tid", "goid", "func"})
      if (!u.contains(k)) {
        ADD_FAILURE() << "unfinished lacks " << k << ": " << u;
        fields = false;
      }
    if (!fields) continue;
    const uint64_t ts = u["ts_ns"], entered = u["entry_ts_ns"];
    EXPECT_GE(ts, entered) << u;
    EXPECT_GE(ts - std::min(ts, entered), min_ns) << "how long it was watched: " << u;
    const json* entry = nullptr;
    for (const auto& e : entries[u["func"]])
      if (e["ts_ns"] == u["entry_ts_ns"] && e["goid"] == u["goid"]) entry = &e;
    if (!entry) {
      ADD_FAILURE() << "no entry for " << u;
      continue;
    }
    EXPECT_EQ((*entry)["pid"], u["pid"]) << u;
    EXPECT_EQ((*entry)["tid"], u["tid"]) << u;
    for (const auto& r : returns[u["func"]])
      EXPECT_FALSE(r["goid"] == u["goid"] && r["ts_ns"].get<uint64_t>() >= entered &&
                   r.value("wall_ns", uint64_t{0}) == r["ts_ns"].get<uint64_t>() - entered)
          << "the unfinished call returned: " << r;
  }
}

// "inlined_match_ground_truth": {"func": F, "gt": KIND}. The fixture prints
// "gt KIND SITE=N ... out-of-line=N": F's entries per site (inlined_in for an inlined copy,
// "out-of-line" for F's own) are exactly those counts, and only the out-of-line copy returns.
void expect_inlined_match(const json& spec, const CaseRun& run) {
  const std::string func = spec.value("func", ""), kind = spec.value("gt", "");
  const json* gt = nullptr;
  for (const auto& g : run.gt)
    if (g["gt"] == kind) gt = &g;
  ASSERT_TRUE(gt) << "no \"gt " << kind << "\" line on stdout:\n" << run.result.out;
  std::map<std::string, int64_t> want, got;
  for (const auto& [k, v] : gt->items())
    if (k != "gt") want[k] = v.get<int64_t>();
  ASSERT_TRUE(want.count("out-of-line")) << *gt;
  ASSERT_GT(want.size(), 1u) << "no inlined site in " << *gt;
  auto entries = by_func(run.events, "entry");
  for (const auto& e : entries[func]) {
    if (e.value("inlined", false)) {
      ++got[e.value("inlined_in", std::string("?"))];
      EXPECT_TRUE(e.value("args", json::array()).empty()) << "an inlined copy's args: " << e;
    } else {
      ++got["out-of-line"];
    }
  }
  EXPECT_EQ(got, want) << func << " entries per site";
  EXPECT_EQ(by_func(run.events, "return")[func].size(), static_cast<size_t>(want["out-of-line"]))
      << "only the out-of-line copy has a RET";
}

// "inlined_counts_match_ground_truth": {"funcs": {F: KIND, ...}, "exact": [F, ...]}. The
// fixture prints "gt KIND OUTER=N ... out-of-line=N" per function. gotap's plan
// (`funcs --json`) says which inlined sites it skipped, as it must where no instruction runs
// once per call. Per function and outer function with no skipped site, the calls seen equal
// the ground truth, 0 included; where a site was skipped, they are at most the ground truth
// (never a phantom call). Functions in "exact" must have no skipped site. trace: entries per
// inlined_in (and out-of-line, with as many returns); count: one count event with the total
// (none when 0); latency: only out-of-line calls are timed.
void expect_inlined_counts(const json& spec, const CaseRun& run) {
  std::vector<std::string> argv = {gotap_binary(), "funcs", "--json", run.binary};
  for (const auto& [func, kind] : spec["funcs"].items()) argv.push_back(func);
  RunResult plan = run_command(argv);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  std::map<std::string, std::set<std::string>> skipped;  // func -> outers with a skipped site
  size_t planned = 0;
  for (const auto& f : events_in(plan.out, "func")) {
    ++planned;
    for (const auto& s : f.value("inline_sites_skipped", json::array()))
      skipped[f["func"]].insert(s["outer"]);
  }
  ASSERT_EQ(planned, spec["funcs"].size()) << plan.out;
  std::set<std::string> exact;
  for (const auto& f : spec.value("exact", json::array())) exact.insert(f.get<std::string>());

  auto entries = by_func(run.events, "entry");
  auto returns = by_func(run.events, "return");
  auto counts = by_func(run.events, "count");
  auto latency = by_func(run.events, "latency");
  for (const auto& [func, kind_j] : spec["funcs"].items()) {
    SCOPED_TRACE(func);
    const std::string kind = kind_j.get<std::string>();
    const json* gt = nullptr;
    for (const auto& g : run.gt)
      if (g["gt"] == kind) gt = &g;
    ASSERT_TRUE(gt) << "no \"gt " << kind << "\" line on stdout:\n" << run.result.out;
    if (exact.count(func)) {
      EXPECT_TRUE(skipped[func].empty())
          << "skipped sites in " << skipped[func].size() << " outer function(s):\n"
          << plan.out;
    }
    std::map<std::string, int64_t> want, got;
    int64_t total_exact = 0, total_bound = 0;
    for (const auto& [k, v] : gt->items()) {
      if (k == "gt") continue;
      want[k] = v.get<int64_t>();
      (skipped[func].count(k) ? total_bound : total_exact) += want[k];
    }
    ASSERT_TRUE(want.count("out-of-line")) << *gt;
    for (const auto& e : entries[func])
      ++got[e.value("inlined", false) ? e.value("inlined_in", std::string("?")) : "out-of-line"];
    const int64_t outofline = want["out-of-line"];
    if (run.mode == "trace") {
      for (const auto& [site, n] : want) {
        if (skipped[func].count(site))
          EXPECT_LE(got[site], n) << "calls in " << site << ", which has skipped sites";
        else
          EXPECT_EQ(got[site], n) << "calls in " << site;
      }
      for (const auto& [site, n] : got) EXPECT_TRUE(want.count(site)) << "calls in " << site;
      EXPECT_EQ(static_cast<int64_t>(returns[func].size()), outofline) << "returns";
    } else if (run.mode == "count") {
      int64_t n = 0;
      ASSERT_LE(counts[func].size(), 1u);
      if (!counts[func].empty()) n = counts[func][0]["count"].get<int64_t>();
      EXPECT_GE(n, total_exact) << "count";
      EXPECT_LE(n, total_exact + total_bound) << "count";
      if (total_exact + total_bound == 0) EXPECT_TRUE(counts[func].empty());
    } else if (run.mode == "latency") {
      int64_t n = 0;
      ASSERT_LE(latency[func].size(), 1u);
      if (!latency[func].empty()) n = latency[func][0]["count"].get<int64_t>();
      EXPECT_EQ(n, outofline) << "latency counts only out-of-line calls";
    } else {
      ADD_FAILURE() << "inlined_counts_match_ground_truth needs trace, count or latency";
    }
  }
}

// "goroutines_match_ground_truth": the fixture prints one "gt name=N goid=G parent=P
// start=F created_by=C ... exited=0|1" line per goroutine of its own (tests/fixtures/
// goroutines). Each such goroutine has a gcreate with that parent_goid, func and created_by,
// a gexit when it exited, and its gcreate, gstate and gexit events in time order. With
// "under": FUNC, only the goroutines FUNC created and their descendants are expected, and
// the goroutine events are of exactly those.
void expect_goroutines_match(const json& spec, const CaseRun& run) {
  std::map<int64_t, json> truth;
  for (const auto& g : run.gt)
    if (g.contains("goid") && g.contains("name")) truth[g["goid"].get<int64_t>()] = g;
  ASSERT_FALSE(truth.empty()) << "no goroutine ground truth on stdout:\n" << run.result.out;
  const std::string under = spec.is_object() ? spec.value("under", "") : "";
  std::set<int64_t> want;
  if (under.empty()) {
    for (const auto& [goid, g] : truth) want.insert(goid);
  } else {
    for (const auto& [goid, g] : truth)
      if (g.value("created_by", "") == under) want.insert(goid);
    ASSERT_FALSE(want.empty()) << "no goroutine created by " << under << " in the ground truth";
    for (size_t n = 0; n != want.size();) {  // and their descendants
      n = want.size();
      for (const auto& [goid, g] : truth)
        if (want.count(g.value("parent", int64_t{-1}))) want.insert(goid);
    }
  }
  std::map<int64_t, std::vector<json>> of_goid;
  for (const auto& e : run.events) {
    const std::string kind = e.value("event", "");
    if (kind == "gcreate" || kind == "gstate" || kind == "gexit")
      of_goid[e["goid"].get<int64_t>()].push_back(e);
  }
  if (!under.empty()) {
    std::set<int64_t> seen;
    for (const auto& [goid, evs] : of_goid) seen.insert(goid);
    EXPECT_EQ(seen, want) << "goroutines with events, under " << under;
  }
  for (int64_t goid : want) {
    const json& t = truth[goid];
    SCOPED_TRACE(t.dump());
    const auto& evs = of_goid[goid];
    for (size_t i = 1; i < evs.size(); ++i)
      EXPECT_LE(evs[i - 1]["ts_ns"], evs[i]["ts_ns"]) << "out of order: " << evs[i];
    auto created = of_kind(evs, "gcreate");
    ASSERT_EQ(created.size(), 1u) << "gcreate events";
    EXPECT_EQ(created[0]["parent_goid"], t["parent"]);
    EXPECT_EQ(created[0]["func"], t["start"]);
    EXPECT_EQ(created[0]["created_by"], t["created_by"]);
    EXPECT_EQ(of_kind(evs, "gexit").size(), t.value("exited", 0) == 1 ? 1u : 0u) << "gexit events";
  }
}

// Every expectation of `expect` on one run.
// One clause of a `selected_match_ground_truth` predicate on a ground-truth line:
// [KEY, OP, VALUE]; KEY "len(k)" is the length of string k; VALUE {"key": K} is the line's K.
bool clause_holds(const json& g, const json& cl) {
  if (!cl.is_array() || cl.size() != 3) {
    ADD_FAILURE() << "a clause is [key, op, value]: " << cl;
    return false;
  }
  std::string key = cl[0].get<std::string>();
  const std::string op = cl[1].get<std::string>();
  const json want = cl[2].is_object() ? g.value(cl[2].value("key", ""), json()) : cl[2];
  if (want.is_null()) return false;
  json got;
  if (key.rfind("len(", 0) == 0 && key.back() == ')') {
    key = key.substr(4, key.size() - 5);
    got = g.contains(key) ? json(g[key].get<std::string>().size()) : json();
  } else {
    got = g.contains(key) ? g[key] : json();
  }
  if (got.is_null()) return false;
  if (op == "==") return got == want;
  if (op == "!=") return got != want;
  if (op == "hasPrefix") return got.get<std::string>().rfind(want.get<std::string>(), 0) == 0;
  if (op == "contains")
    return got.get<std::string>().find(want.get<std::string>()) != std::string::npos;
  if (op == "<") return got < want;
  if (op == "<=") return got <= want;
  if (op == ">") return got > want;
  if (op == ">=") return got >= want;
  ADD_FAILURE() << "unknown op " << op;
  return false;
}

// The calls a condition must select, from the fixture's own ground truth:
// `{"func": F, "gt": KIND, "id": KEY, "arg": NAME, "where": [[clause, ...], ...],
//   "rate_limited": bool}`. `where` is a list of alternatives, each a list of clauses that
// must all hold (no `where`: every call). trace: F's entries are exactly the selected calls
// (their argument NAME's value equals the ground truth's KEY), each with its return; with
// `rate_limited`, a subset, the summary's `rate_limited` counting the rest. count, latency:
// F's count is the number selected (no event when none).
void expect_selected_match(const json& spec, const CaseRun& run) {
  const std::string func = spec.value("func", ""), kind = spec.value("gt", "call");
  const std::string id = spec.value("id", "seq"), arg = spec.value("arg", id);
  std::multiset<json> want;
  size_t truth = 0;
  for (const auto& g : run.gt) {
    if (g.value("gt", "") != kind) continue;
    ++truth;
    bool sel = !spec.contains("where");
    for (const auto& alt : spec.value("where", json::array())) {
      bool all = true;
      for (const auto& cl : alt) all = all && clause_holds(g, cl);
      sel = sel || all;
    }
    if (sel) want.insert(g[id]);
  }
  EXPECT_GT(truth, 0u) << "no ground truth of kind " << kind;
  if (run.mode == "count" || run.mode == "latency") {
    size_t got = 0, events = 0;
    for (const auto& e : of_kind(run.events, run.mode))
      if (e.value("func", "") == func) {
        got += e.value("count", size_t{0});
        ++events;
      }
    EXPECT_EQ(got, want.size()) << func << " " << run.mode;
    if (want.empty()) EXPECT_EQ(events, 0u);
    return;
  }
  std::multiset<json> got;
  auto entries = by_func(run.events, "entry"), returns = by_func(run.events, "return");
  for (const auto& e : entries[func]) {
    json v;
    for (const auto& a : e.value("args", json::array()))
      if (a.value("name", "") == arg) v = a.value("value", json());
    EXPECT_FALSE(v.is_null()) << "an entry without " << arg << ": " << e;
    got.insert(v);
  }
  EXPECT_EQ(returns[func].size(), got.size()) << "returns of " << func;
  for (const auto& r : returns[func]) EXPECT_TRUE(r.contains("duration_ns")) << r;
  if (!spec.value("rate_limited", false)) {
    EXPECT_EQ(got, want) << func << ": the calls selected";
    return;
  }
  for (const auto& v : got) EXPECT_TRUE(want.count(v)) << v << " was not to be selected";
  auto s = of_kind(run.events, "summary");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(got.size() + s[0].value("rate_limited", size_t{0}), want.size())
      << "reported plus rate_limited";
  EXPECT_LT(got.size(), want.size()) << "the rate limit left nothing out";
}

void expect_run(const json& expect, const std::string& backend, const CaseRun& run) {
  EXPECT_EQ(run.result.exit_code, expect.value("exit_code", 0)) << run.result.err;
  if (expect.value("no_unfinished", false)) {
    EXPECT_TRUE(of_kind(run.events, "unfinished").empty()) << run.result.out;
  }
  if (expect.contains("event_counts")) {
    for (const auto& [kind, n] : expect["event_counts"].items())
      EXPECT_EQ(of_kind(run.events, kind).size(), n.get<size_t>()) << kind;
  }
  if (expect.contains("summary")) {
    auto s = of_kind(run.events, "summary");
    EXPECT_EQ(s.size(), 1u) << run.result.out;
    if (!s.empty()) {
      EXPECT_EQ(s[0]["backend"], backend);
      expect_contains(expect["summary"], s[0], "summary");
      // Its ts_ns ends the trace: no event comes after it.
      for (const auto& e : run.events) {
        if (e.contains("ts_ns")) {
          EXPECT_LE(e["ts_ns"], s[0].value("ts_ns", json())) << e;
        }
      }
    }
  }
  if (expect.contains("each_event")) {
    for (const auto& [kind, want] : expect["each_event"].items())
      for (const auto& e : of_kind(run.events, kind)) expect_contains(want, e, kind);
  }
  if (expect.contains("min_event_counts")) {
    for (const auto& [kind, n] : expect["min_event_counts"].items())
      EXPECT_GE(of_kind(run.events, kind).size(), n.get<size_t>()) << kind;
  }
  if (expect.contains("goroutines_match_ground_truth"))
    expect_goroutines_match(expect["goroutines_match_ground_truth"], run);
  if (expect.contains("latency_matches_ground_truth"))
    expect_latency_match(expect["latency_matches_ground_truth"], run);
  if (expect.contains("durations_within_ground_truth"))
    expect_durations_within(expect["durations_within_ground_truth"], run);
  if (expect.contains("unfinished_match_entries"))
    expect_unfinished_match(expect["unfinished_match_entries"], run);
  if (expect.contains("inlined_match_ground_truth"))
    expect_inlined_match(expect["inlined_match_ground_truth"], run);
  if (expect.contains("inlined_counts_match_ground_truth"))
    expect_inlined_counts(expect["inlined_counts_match_ground_truth"], run);
  if (expect.contains("selected_match_ground_truth"))
    expect_selected_match(expect["selected_match_ground_truth"], run);
  if (expect.contains("calls_match_ground_truth"))
    expect_calls_match(expect["calls_match_ground_truth"],
                       expect.value("may_be_incomplete", json()), run);
}

struct CaseParam {
  std::string name, backend;
};
void PrintTo(const CaseParam& p, std::ostream* os) {
  *os << p.name << " on " << p.backend;
}

class RuntimeCase : public ::testing::TestWithParam<CaseParam> {};

TEST_P(RuntimeCase, MeetsExpectations) {
  const Case& c = case_named(GetParam().name);
  const std::string& backend = GetParam().backend;
  ASSERT_TRUE(c.error.empty()) << c.file << ": " << c.error;
  std::string why;
  if (skip_reason(c, &why)) GTEST_SKIP() << why;
  const json expect = c.expect(backend);
  const int attempts = std::max(1, expect.value("attempts", 1));
  const auto fixtures = c.fixtures(backend);
  if (fixtures.empty()) GTEST_SKIP() << "no fixture of Go 1.17 or later built for " << backend;
  for (const Fixture& f : fixtures) {
    SCOPED_TRACE(c.name + " " + backend + " " + f.label());
    // Every run but the last is checked quietly; the last one reports what it misses.
    bool met = false;
    for (int i = 1; i < attempts && !met; ++i) {
      ::testing::TestPartResultArray missed;
      {
        ::testing::ScopedFakeTestPartResultReporter quiet(
            ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &missed);
        expect_run(expect, backend, run_case(c, f, backend, i > 1));
      }
      met = missed.size() == 0;
      if (!met)
        std::cerr << c.name << " " << backend << " " << f.label() << ": run " << i << " of "
                  << attempts << " missed: " << missed.GetTestPartResult(0).message() << "\n";
    }
    if (!met) expect_run(expect, backend, run_case(c, f, backend, attempts > 1));
  }
}

std::vector<CaseParam> case_params() {
  std::vector<CaseParam> out;
  for (const auto& c : all_cases())
    for (const auto& b : c.error.empty() ? c.backends() : std::vector<std::string>{"load"})
      out.push_back({c.name, b});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, RuntimeCase, ::testing::ValuesIn(case_params()),
                         [](const auto& i) { return ident(i.param.name + "_" + i.param.backend); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RuntimeCase);

// The args and results of two backends' events of one function, pairwise.
size_t expect_same_values(const json& a, const json& b, const std::string& where) {
  size_t compared = 0;
  EXPECT_EQ(a.size(), b.size()) << where << ": " << a << "\n" << b;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    EXPECT_EQ(a[i]["name"], b[i]["name"]) << at;
    EXPECT_EQ(a[i]["type"], b[i]["type"]) << at;
    if (complete(a[i]["value"]) && complete(b[i]["value"])) {
      EXPECT_EQ(normalized(a[i]["value"]), normalized(b[i]["value"])) << at;
      ++compared;
    }
  }
  return compared;
}

// Which state changes (from, to) each of the program's own goroutines made, keyed by what
// is the same in both runs: goroutine 1, or the start function of a goroutine created while
// traced in package main (goroutine ids beyond 1 differ between runs, and the runtime's own
// goroutines run on timers). Left out, as they depend on scheduling: a running goroutine
// preempted (running -> runnable), the GC's suspensions (preempted) and stack moves
// (copystack); and a system call's end is one change whether it found a P free (syscall ->
// running) or not (syscall -> runnable).
std::map<std::string, std::set<std::string>> stable_transitions(const std::vector<json>& evs) {
  std::map<int64_t, std::string> key_of = {{1, "goroutine 1"}};
  for (const auto& e : evs)
    if (e.value("event", "") == "gcreate" && e.value("func", "").rfind("main.", 0) == 0)
      key_of[e["goid"].get<int64_t>()] = e.value("func", "");
  std::map<std::string, std::set<std::string>> out;
  for (const auto& e : evs) {
    if (e.value("event", "") != "gstate") continue;
    auto k = key_of.find(e["goid"].get<int64_t>());
    if (k == key_of.end()) continue;
    const std::string from = e.value("from", ""), to = e.value("to", "");
    if (from == "running" && to == "runnable") continue;
    if (from == "preempted" || to == "preempted" || from == "copystack" || to == "copystack")
      continue;
    // Out of a system call to running when a P was free, else to runnable: either is leaving.
    if (from == "syscall" && (to == "running" || to == "runnable")) {
      out[k->second].insert("syscall -> running or runnable");
      continue;
    }
    out[k->second].insert(from + " -> " + to);
  }
  return out;
}

// Returns how many values both backends captured and were compared. `names`: the two
// backends, as the messages say them.
// `same_counts` false: the program itself makes a varying number of the calls (the runtime's
// own), so each kind's and function's events are compared for their kinds, keys and values,
// not their numbers.
size_t expect_parity(const CaseRun& p, const CaseRun& e, size_t min_compared,
                     const std::string& names = "ptrace, ebpf", bool same_counts = true) {
  std::map<std::string, std::vector<json>> kinds_p, kinds_e;
  for (const auto& ev : p.events) kinds_p[ev["event"]].push_back(ev);
  for (const auto& ev : e.events) kinds_e[ev["event"]].push_back(ev);
  std::set<std::string> names_p, names_e;
  for (const auto& [k, v] : kinds_p) names_p.insert(k);
  for (const auto& [k, v] : kinds_e) names_e.insert(k);
  EXPECT_EQ(names_p, names_e) << "event kinds (" + names + ")";
  for (const auto& [kind, evs_p] : kinds_p) {
    const auto& evs_e = kinds_e[kind];
    if (kind == "gstate") {
      // How often a goroutine changes state depends on scheduling; which goroutines do not.
      auto count_goids = [](const std::vector<json>& evs) {
        std::set<std::string> g;
        for (const auto& e : evs) g.insert(e.value("goid", json()).dump());
        return g.size();
      };
      EXPECT_EQ(count_goids(evs_p), count_goids(evs_e)) << "goroutines changing state";
      EXPECT_EQ(stable_transitions(p.events), stable_transitions(e.events))
          << "state changes per goroutine (" + names + ")";
    } else if (same_counts) {
      EXPECT_EQ(evs_p.size(), evs_e.size()) << kind << " events (" + names + ")";
    }
    if (kind == "summary") continue;
    std::set<std::string> keys_p, keys_e;
    for (const auto& ev : evs_p) keys_p.merge(keys_of(ev));
    for (const auto& ev : evs_e) keys_e.merge(keys_of(ev));
    // The trampoline backend's plain count keeps counters and reads no error result: no
    // `failed` (docs/cli.md, "The trampoline backend"); its latency has it.
    if (names.find("trampoline") != std::string::npos && kind == "count") {
      keys_p.erase("failed");
      keys_e.erase("failed");
    }
    EXPECT_EQ(keys_p, keys_e) << "keys of " << kind << " events (" + names + ")";
  }
  auto sp = of_kind(p.events, "summary"), se = of_kind(e.events, "summary");
  if (sp.size() == 1 && se.size() == 1) {
    for (const char* k :
         {"backend", "probes", "events", "lost", "ts_ns", "functions", "ended_by", "pid"}) {
      EXPECT_TRUE(sp[0].contains(k)) << names + ": the first summary lacks " << k << ": " << sp[0];
      EXPECT_TRUE(se[0].contains(k)) << names + ": the second summary lacks " << k << ": " << se[0];
    }
    for (const char* k : {"ended_by", "lost", "exit_code", "functions", "probes", "events"}) {
      // As gstate above, and as every kind without same_counts.
      if (std::string(k) == "events" && (kinds_p.count("gstate") || !same_counts)) continue;
      EXPECT_EQ(sp[0].value(k, json()), se[0].value(k, json())) << "summary " << k;
    }
  }
  size_t compared = 0;
  for (const auto& [kind, list] : {std::pair{"entry", "args"}, std::pair{"return", "results"}}) {
    auto fp = by_func(p.events, kind), fe = by_func(e.events, kind);
    for (const auto& [func, evs] : fp) {
      const auto& other = fe[func];
      if (same_counts)
        EXPECT_EQ(evs.size(), other.size()) << func << " " << kind << " events (" + names + ")";
      // Calls in order pair up only when both runs made as many (an extra call of the
      // runtime's shifts the rest).
      else if (evs.size() != other.size())
        continue;
      for (size_t i = 0; i < std::min(evs.size(), other.size()); ++i)
        compared += expect_same_values(evs[i].value(list, json::array()),
                                       other[i].value(list, json::array()),
                                       func + "#" + std::to_string(i) + "." + list);
    }
  }
  // Per function: inlined copies at the same sites; unfinished calls on the same goroutines;
  // latency of as many calls, in the same bucket scheme (not the same buckets: durations
  // differ from run to run).
  auto sites = [](const std::vector<json>& evs) {
    std::multiset<std::string> out;
    for (const auto& e : evs) out.insert(e.value("inlined_in", std::string("out-of-line")));
    return out;
  };
  auto ep = by_func(p.events, "entry"), ee = by_func(e.events, "entry");
  auto site_set = [&](const std::vector<json>& evs) {
    const auto m = sites(evs);
    return std::set<std::string>(m.begin(), m.end());
  };
  for (const auto& [func, evs] : ep)
    if (same_counts)
      EXPECT_EQ(sites(evs), sites(ee[func])) << func << " entries per site (" + names + ")";
    else
      EXPECT_EQ(site_set(evs), site_set(ee[func])) << func << " sites entered (" + names + ")";
  auto goids = [](const std::vector<json>& evs) {
    std::multiset<std::string> out;
    for (const auto& e : evs) out.insert(e.value("goid", json()).dump());
    return out;
  };
  auto up = by_func(p.events, "unfinished"), ue = by_func(e.events, "unfinished");
  for (const auto& [func, evs] : up)
    EXPECT_EQ(goids(evs), goids(ue[func])) << func << " unfinished goroutines (" + names + ")";
  auto lp = by_func(p.events, "latency"), le = by_func(e.events, "latency");
  for (const auto& [func, evs] : lp) {
    EXPECT_EQ(evs.size(), le[func].size()) << func << " latency events (" + names + ")";
    for (size_t i = 0; i < std::min(evs.size(), le[func].size()); ++i) {
      EXPECT_EQ(evs[i]["count"], le[func][i]["count"]) << func << " latency count";
      expect_latency_shape(evs[i], "first " + func);
      expect_latency_shape(le[func][i], "second " + func);
    }
  }
  bool any_args = false;
  for (const auto& ev : kinds_p["entry"])
    for (const auto& a : ev.value("args", json::array()))
      if (complete(a.value("value", json()))) any_args = true;
  bool counts_differ = false;
  for (const auto& [func, evs] : ep) counts_differ |= evs.size() != ee[func].size();
  if (any_args && (same_counts || !counts_differ)) {
    EXPECT_GE(compared, min_compared) << "values captured by both and compared";
  }
  return compared;
}

class RuntimeParity : public ::testing::TestWithParam<std::string> {};

// "<case>" compares ptrace with eBPF; "<case>_trampoline" eBPF with the trampoline backend.
TEST_P(RuntimeParity, BackendsAgree) {
  std::string name = GetParam();
  const std::string suffix = "_trampoline";
  const bool trampoline =
      name.size() > suffix.size() && name.ends_with(suffix) && !case_named(name).error.empty();
  if (trampoline) name.resize(name.size() - suffix.size());
  const Case& c = case_named(name);
  ASSERT_TRUE(c.error.empty()) << c.file << ": " << c.error;
  std::string why;
  if (skip_reason(c, &why)) GTEST_SKIP() << why;
  // With args, at least this many values both backends captured (default 1).
  const json parity = c.doc.value("parity", json(true));
  const size_t min_compared = parity.is_object() ? parity.value("min_compared", size_t{1}) : 1;
  const bool same_counts = parity.is_object() ? parity.value("same_counts", true) : true;
  const std::string a = trampoline ? "ebpf" : "ptrace", b = trampoline ? "trampoline" : "ebpf";
  const auto fixtures = c.fixtures(b);
  if (fixtures.empty()) GTEST_SKIP() << "no fixture of Go 1.17 or later built for " << b;
  size_t compared = 0;
  for (const Fixture& f : fixtures) {
    SCOPED_TRACE(c.name + " " + f.label());
    const CaseRun& p = run_case(c, f, a);
    const CaseRun& e = run_case(c, f, b);
    ASSERT_EQ(p.result.exit_code, e.result.exit_code) << p.result.err << "\n" << e.result.err;
    compared += expect_parity(p, e, min_compared, a + ", " + b, same_counts);
  }
  RecordProperty("values_compared", static_cast<int>(compared));
}

std::vector<std::string> parity_params() {
  std::vector<std::string> out;
  for (const auto& c : all_cases()) {
    if (!c.error.empty()) continue;  // RuntimeCase reports it
    auto b = c.backends();
    auto has = [&](const char* x) { return std::find(b.begin(), b.end(), x) != b.end(); };
    if (c.doc.contains("parity") && c.doc["parity"] == false) continue;
    if (has("ptrace") && has("ebpf")) out.push_back(c.name);
    if (has("ebpf") && has("trampoline")) out.push_back(c.name + "_trampoline");
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, RuntimeParity, ::testing::ValuesIn(parity_params()),
                         [](const auto& i) { return ident(i.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RuntimeParity);

}  // namespace
}  // namespace gotap::testing
