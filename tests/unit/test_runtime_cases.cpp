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
//     "backends": ["ptrace", "ebpf"],        // optional; default both
//     "timeout_s": 120,                      // optional; per gotap run
//     "expect": { ... },                     // what every backend must show
//     "per_backend": {"ebpf": { ... }},      // optional; merged (JSON merge patch) into
//                                            // "expect" for that backend
//     "parity": true                         // optional; false: no parity check
//   }
//
// Expectations ("expect"), each optional:
//   "exit_code": N            gotap's exit status (default 0)
//   "no_unfinished": true     no `unfinished` event
//   "event_counts": {"entry": 6, ...}   exactly that many events of each kind named
//   "summary": {...}          one `summary` event, with "backend" the backend run, containing
//                             these keys and values (expect_contains in fixtures.h)
//   "calls_match_ground_truth": {
//     "funcs": [...]          optional: compare only these functions' ground truth (each
//                             must be in it)
//     "names": "ground_truth" (default) args and results named as the ground truth names
//                             them; "positional": arg0, arg1, ... and ~r0, ~r1, ...
//                             (stripped builds); "any": names not compared
//     "types": "ground_truth" (default) args and results typed as the ground truth types
//                             them; "any": types not compared (ArgInfo words)
//     "results": true         (default) compare the results of returns too
//     "min_compared": N       at least N values compared per fixture run
//   }
//       Every ground-truth call ({"gt":"call",...} on stdout) has an `entry` event of the
//       same function, in order per function, and every {"gt":"return"} a `return`; each
//       return is on its entry's goroutine and carries duration_ns. Args and results have
//       the ground truth's count and types; their values contain the ground truth's
//       (expect_contains: extra keys such as "addr" allowed, map entries as sets).
//   "may_be_incomplete": {"except_types": ["int", "string"]}
//       values the backend did not capture completely (a "raw", "truncated" or "unreadable"
//       key, a pointer with "addr" but no "elem", a string starting "<not captured") are
//       skipped instead of compared, except for values of the types listed, which must be
//       complete. Without it every value is compared.
//
// Parity (per case and fixture binary, both backends; runs are shared with RuntimeCase when
// both run in one process): the same event kinds with the same number of events each; the
// same keys per kind (for `summary`, the contract's keys, and equal ended_by, lost,
// exit_code, functions, probes and events); per function the same entries and returns, with
// args and results of the same names and types, and equal values wherever both backends
// captured them completely ("addr" keys left out, map entries compared as sets).
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
  // The built fixture binaries the case selects.
  std::vector<Fixture> fixtures() const {
    auto flavours = strings("flavours"), versions = strings("go_versions");
    auto wanted = [](const std::vector<std::string>& set, const std::string& v) {
      return set.empty() || std::find(set.begin(), set.end(), v) != set.end();
    };
    std::vector<Fixture> out;
    for (auto& f : all_fixtures(doc.value("fixture", "")))
      if (wanted(flavours, f.flavour) && wanted(versions, f.go_version)) out.push_back(f);
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
  RunResult result;
  std::vector<json> events;  // gotap's events, in output order
  std::vector<json> gt;      // the fixture's ground-truth lines
};

const CaseRun& run_case(const Case& c, const Fixture& f, const std::string& backend) {
  static std::map<std::string, CaseRun> cache;
  const std::string key = c.name + "|" + f.path + "|" + backend;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::vector<std::string> argv = {gotap_binary()};
  for (size_t i = 0; i < c.doc["command"].size(); ++i) {
    argv.push_back(c.doc["command"][i].get<std::string>());
    if (i == 0) argv.insert(argv.end(), {"--backend", backend});
  }
  argv.insert(argv.end(), {"--", f.path});
  for (const auto& a : c.strings("argv")) argv.push_back(a);
  CaseRun r;
  r.result = run_command(argv, c.doc.value("timeout_s", 120));
  std::istringstream in(r.result.out);
  for (std::string l; std::getline(in, l);) {
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
// unfollowed, no placeholder string.
bool complete(const json& v) {
  if (v.is_object()) {
    // An interface recognised among untyped words keeps those words in "raw" next to its
    // dynamic type and value: complete when the value is.
    if (v.contains("raw") && v.contains("type") && v.contains("value")) return complete(v["value"]);
    if (v.contains("raw") || v.contains("truncated") || v.contains("unreadable")) return false;
    if (v.contains("addr") && !v.contains("elem") && !v.contains("func")) return false;
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

// v without addresses (they differ from run to run) and with map entries sorted.
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
  for (const auto& g : run.gt) (g["gt"] == "call" ? gt_calls : gt_rets)[g["func"]].push_back(g);
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
  const std::string names = spec.value("names", "ground_truth");
  const bool results = spec.value("results", true);
  const bool types = spec.value("types", "ground_truth") == "ground_truth";
  std::set<std::string> must_be_complete;
  if (incomplete_ok.is_object() && incomplete_ok.contains("except_types"))
    for (const auto& t : incomplete_ok["except_types"]) must_be_complete.insert(t);
  auto entries = by_func(run.events, "entry"), returns = by_func(run.events, "return");
  size_t compared = 0;
  for (const auto& [func, calls] : gt_calls) {
    ASSERT_EQ(entries[func].size(), calls.size()) << func << " entries";
    ASSERT_EQ(returns[func].size(), gt_rets[func].size()) << func << " returns";
    for (size_t i = 0; i < returns[func].size() && i < entries[func].size(); ++i) {
      EXPECT_EQ(returns[func][i]["goid"], entries[func][i]["goid"]) << func << "#" << i;
      EXPECT_TRUE(returns[func][i].contains("duration_ns")) << returns[func][i];
    }
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
          continue;
        }
        expect_contains(want[k]["value"], gv, where);
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, spec.value("min_compared", size_t{0})) << "values compared";
}

// Every expectation of `expect` on one run.
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
    }
  }
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
  for (const Fixture& f : c.fixtures()) {
    SCOPED_TRACE(c.name + " " + backend + " " + f.label());
    expect_run(expect, backend, run_case(c, f, backend));
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

// Returns how many values both backends captured and were compared.
size_t expect_parity(const CaseRun& p, const CaseRun& e) {
  std::map<std::string, std::vector<json>> kinds_p, kinds_e;
  for (const auto& ev : p.events) kinds_p[ev["event"]].push_back(ev);
  for (const auto& ev : e.events) kinds_e[ev["event"]].push_back(ev);
  std::set<std::string> names_p, names_e;
  for (const auto& [k, v] : kinds_p) names_p.insert(k);
  for (const auto& [k, v] : kinds_e) names_e.insert(k);
  EXPECT_EQ(names_p, names_e) << "event kinds (ptrace, ebpf)";
  for (const auto& [kind, evs_p] : kinds_p) {
    const auto& evs_e = kinds_e[kind];
    EXPECT_EQ(evs_p.size(), evs_e.size()) << kind << " events (ptrace, ebpf)";
    if (kind == "summary") continue;
    std::set<std::string> keys_p, keys_e;
    for (const auto& ev : evs_p) keys_p.merge(keys_of(ev));
    for (const auto& ev : evs_e) keys_e.merge(keys_of(ev));
    EXPECT_EQ(keys_p, keys_e) << "keys of " << kind << " events (ptrace, ebpf)";
  }
  auto sp = of_kind(p.events, "summary"), se = of_kind(e.events, "summary");
  if (sp.size() == 1 && se.size() == 1) {
    for (const char* k :
         {"backend", "probes", "events", "lost", "ts_ns", "functions", "ended_by", "pid"}) {
      EXPECT_TRUE(sp[0].contains(k)) << "ptrace summary lacks " << k << ": " << sp[0];
      EXPECT_TRUE(se[0].contains(k)) << "ebpf summary lacks " << k << ": " << se[0];
    }
    for (const char* k : {"ended_by", "lost", "exit_code", "functions", "probes", "events"})
      EXPECT_EQ(sp[0].value(k, json()), se[0].value(k, json())) << "summary " << k;
  }
  size_t compared = 0;
  for (const auto& [kind, list] : {std::pair{"entry", "args"}, std::pair{"return", "results"}}) {
    auto fp = by_func(p.events, kind), fe = by_func(e.events, kind);
    for (const auto& [func, evs] : fp) {
      const auto& other = fe[func];
      EXPECT_EQ(evs.size(), other.size()) << func << " " << kind << " events (ptrace, ebpf)";
      for (size_t i = 0; i < std::min(evs.size(), other.size()); ++i)
        compared += expect_same_values(evs[i].value(list, json::array()),
                                       other[i].value(list, json::array()),
                                       func + "#" + std::to_string(i) + "." + list);
    }
  }
  // Functions without parameters (assembly, say) have nothing to compare.
  bool any_params = false;
  for (const auto& ev : p.events)
    if (!ev.value("args", json::array()).empty() || !ev.value("results", json::array()).empty())
      any_params = true;
  if (any_params) {
    EXPECT_GT(compared, 0u) << "no value captured by both";
  }
  return compared;
}

class RuntimeParity : public ::testing::TestWithParam<std::string> {};

TEST_P(RuntimeParity, BackendsAgree) {
  const Case& c = case_named(GetParam());
  ASSERT_TRUE(c.error.empty()) << c.file << ": " << c.error;
  std::string why;
  if (skip_reason(c, &why)) GTEST_SKIP() << why;
  size_t compared = 0;
  for (const Fixture& f : c.fixtures()) {
    SCOPED_TRACE(c.name + " " + f.label());
    const CaseRun& p = run_case(c, f, "ptrace");
    const CaseRun& e = run_case(c, f, "ebpf");
    ASSERT_EQ(p.result.exit_code, e.result.exit_code) << p.result.err << "\n" << e.result.err;
    compared += expect_parity(p, e);
  }
  RecordProperty("values_compared", static_cast<int>(compared));
}

std::vector<std::string> parity_params() {
  std::vector<std::string> out;
  for (const auto& c : all_cases()) {
    if (!c.error.empty()) continue;  // RuntimeCase reports it
    auto b = c.backends();
    bool both = std::find(b.begin(), b.end(), "ptrace") != b.end() &&
                std::find(b.begin(), b.end(), "ebpf") != b.end();
    if (both && c.doc.value("parity", true)) out.push_back(c.name);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, RuntimeParity, ::testing::ValuesIn(parity_params()),
                         [](const auto& i) { return ident(i.param); });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RuntimeParity);

}  // namespace
}  // namespace gotap::testing
