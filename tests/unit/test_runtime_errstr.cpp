// Error values and strings in interfaces (tests/fixtures/errstr), once per backend, on every
// Go release with DWARF and stripped: each error main.(*src).Fail returned must carry, as its
// result's "error" (docs/json.md), the text the fixture's own Error() call printed, for the
// standard library's error types (*errors.errorString, *fmt.wrapError, *fs.PathError,
// *os.SyscallError, *net.OpError with no address, one and two, *url.Error around an
// *net.OpError, *net.DNSError, *net.AddrError, syscall.Errno's text of its release, the
// constant errors of net and context); and the string main.(*src).Show was passed in its `any`
// argument must be that string. eBPF copies these values in the kernel (bpf/value_chain.h); before
// it did, it showed the heap ones as <not captured> or a bare pointer.
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

constexpr int kCalls = 24;  // each of the twelve kinds twice

class ErrorStrings : public ::testing::TestWithParam<std::string> {};

TEST_P(ErrorStrings, TracedAsTheProgramPrintsThem) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  std::vector<Fixture> fixtures;
  for (const auto& fx : all_fixtures("errstr"))
    if (fx.flavour == "default" || fx.flavour == "stripped") fixtures.push_back(fx);
  if (fixtures.empty())
    GTEST_SKIP() << "no errstr fixtures in " << fixtures_dir() << " (build-fixtures.sh)";
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    RunResult r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--json",
                               "--max-str", "200", "main.(*src).Fail", "main.(*src).Show", "--",
                               fx.path, std::to_string(kCalls)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The truth, per seq.
    std::map<int, json> err_truth, any_truth;
    std::istringstream lines(r.out);
    for (std::string l; std::getline(lines, l);) {
      json line = json::parse(l, nullptr, false);
      if (line.is_discarded() || !line.is_object() || !line.contains("seq")) continue;
      if (line.value("gt", "") == "err") err_truth[line["seq"].get<int>()] = line;
      if (line.value("gt", "") == "any") any_truth[line["seq"].get<int>()] = line;
    }
    ASSERT_EQ(err_truth.size(), size_t{kCalls}) << r.out.substr(0, 3000);
    // One goroutine calls Fail(seq) for seq = 0, 1, ...: its returns come in that order.
    int fail_seq = 0, shown = 0;
    for (const auto& ev : events_in(r.out)) {
      const std::string func = ev.value("func", "");
      if (ev.value("event", "") == "return" && func == "main.(*src).Fail") {
        SCOPED_TRACE("Fail(" + std::to_string(fail_seq) + ")");
        ASSERT_LT(fail_seq, kCalls);
        const json& want = err_truth[fail_seq++];
        ASSERT_EQ(ev["results"].size(), 1u) << ev.dump();
        const json& v = ev["results"][0]["value"];
        EXPECT_EQ(v.value("type", ""), want["type"].get<std::string>()) << v.dump();
        EXPECT_EQ(v.value("error", ""), want["msg"].get<std::string>()) << v.dump();
      } else if (ev.value("event", "") == "entry" && func == "main.(*src).Show") {
        const json& args = ev["args"];
        ASSERT_EQ(args.size(), 3u) << ev.dump();  // the receiver, seq, v
        const json& seq = args[1]["value"];
        ASSERT_TRUE(seq.is_number_integer()) << ev.dump();
        SCOPED_TRACE("Show(" + seq.dump() + ")");
        ASSERT_TRUE(any_truth.count(seq.get<int>())) << ev.dump();
        const json& v = args[2]["value"];
        ++shown;
        EXPECT_EQ(v.value("type", ""), "string") << v.dump();
        EXPECT_EQ(v.value("value", json()), any_truth[seq.get<int>()]["value"]) << v.dump();
      }
    }
    EXPECT_EQ(fail_seq, kCalls) << r.out.substr(0, 3000);
    EXPECT_EQ(shown, kCalls) << r.out.substr(0, 3000);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ErrorStrings, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
