// `gotap funcs --json --backend trampoline` (probe_via): which sites of each function the
// trampoline backend jumps from, held to `go tool objdump`'s listing of the fixtures (the
// .objdump beside each): a RET marked "jump" ends objdump's `ADDQ $N, SP` (N under 0x80,
// 4 bytes), `POPQ BP`, an optional `NOPL`, `RET`, and every RET so ended is marked "jump"
// when the entry is; an entry marked "jump" is objdump's stack check (a compare with
// 0x10(R14), then a JBE); "no stack check" means objdump shows none.
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

struct Insn {
  uint64_t addr = 0;
  std::string text;
  size_t len = 0;
};

// objdump's instructions of each function, by name.
std::map<std::string, std::vector<Insn>> listing(const std::string& text) {
  std::map<std::string, std::vector<Insn>> out;
  std::vector<Insn>* cur = nullptr;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("TEXT ", 0) == 0) {
      const auto end = line.find("(SB)");
      cur = end == std::string::npos ? nullptr : &out[line.substr(5, end - 5)];
      continue;
    }
    if (!cur || line.empty() || line[0] != ' ') continue;
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, '\t');) {
      const auto b = x.find_first_not_of(' '), e = x.find_last_not_of(' ');
      if (b != std::string::npos) f.push_back(x.substr(b, e - b + 1));
    }
    if (f.size() < 4 || f[1].rfind("0x", 0) != 0) continue;
    cur->push_back({std::stoull(f[1], nullptr, 16), f[3], f[2].size() / 2});
  }
  return out;
}

// An epilogue a RET's one-byte jump goes over, as go tool objdump spells it: Go 1.21's
// `ADDQ $N, SP` (4 bytes for N under 128, else 7; 128 itself `SUBQ $-0x80, SP`), `POPQ BP`,
// [`NOPL`,] `RET`; or before, `MOVQ D(SP), BP`, `ADDQ $N, SP`, `RET`. Below: one whose
// jump's displacement is negative (D's low byte 0x80 or more; N of 32 KiB or more), which
// puts its stub below a non-PIE's image.
enum class Epilogue { None, Jump, Below };

Epilogue jump_epilogue(const std::vector<Insn>& fn, uint64_t ret) {
  size_t k = 0;
  while (k < fn.size() && fn[k].addr != ret) ++k;
  if (k == fn.size() || fn[k].text != "RET" || k < 2) return Epilogue::None;
  auto add_rsp = [](const Insn& add, uint64_t* n) {
    if (add.text.rfind("ADDQ $0x", 0) != 0 || !add.text.ends_with(", SP")) return false;
    *n = std::stoull(add.text.substr(6), nullptr, 16);
    return add.len == (*n < 0x80 ? 4u : 7u);
  };
  uint64_t n = 0;
  if (fn[k - 1].text.rfind("ADDQ ", 0) == 0) {
    const Insn& mov = fn[k - 2];
    if (!add_rsp(fn[k - 1], &n) || mov.text.rfind("MOVQ ", 0) != 0 ||
        !mov.text.ends_with("(SP), BP"))
      return Epilogue::None;
    const uint64_t d =
        mov.text.rfind("MOVQ 0x", 0) == 0 ? std::stoull(mov.text.substr(5), nullptr, 16) : 0;
    return (d & 0xff) >= 0x80 ? Epilogue::Below : Epilogue::Jump;
  }
  if (fn[k - 1].text == "NOPL") --k;
  if (k < 2 || fn[k - 1].text != "POPQ BP") return Epilogue::None;
  const Insn& add = fn[k - 2];
  if (add.text == "SUBQ $-0x80, SP") return add.len == 4 ? Epilogue::Jump : Epilogue::None;
  if (!add_rsp(add, &n)) return Epilogue::None;
  return n >= 0x8000 && (n & 0x8000) ? Epilogue::Below : Epilogue::Jump;
}

bool stack_check(const std::vector<Insn>& fn) {
  for (size_t k = 0; k + 1 < fn.size() && k < 3; ++k)
    // Its operands in either order: objdump's spelling changed across releases.
    if (fn[k].text.rfind("CMPQ ", 0) == 0 && fn[k].text.find("0x10(R14)") != std::string::npos &&
        fn[k + 1].text.rfind("JBE ", 0) == 0)
      return true;
  return false;
}

TEST(FuncsProbeVia, EverySiteAgreesWithGoObjdump) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  size_t files = 0, jumps = 0, rets = 0;
  for (const Fixture& f : all_fixtures()) {
    if (f.flavour != "default") continue;
    const std::string od = read_file(f.path + ".objdump");
    if (od.empty()) continue;
    SCOPED_TRACE(f.label());
    ++files;
    const auto fns = listing(od);
    RunResult r = run_command(
        {gotap_binary(), "funcs", "--json", "--backend", "trampoline", f.path, "main.*"}, 60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const json& e : events_in(r.out, "func")) {
      if (!e.contains("probe_via")) {
        ADD_FAILURE() << e.dump();
        continue;
      }
      const auto it = fns.find(e["func"].get<std::string>());
      if (it == fns.end()) continue;  // only inlined
      const json& via = e["probe_via"];
      SCOPED_TRACE(e["func"].get<std::string>());
      const bool entry = via["entry"] == "jump";
      // A site no jump takes falls back to a kernel uprobe, and says so.
      EXPECT_TRUE(entry || via["entry"] == "uprobe") << via;
      if (entry) EXPECT_TRUE(stack_check(it->second));
      if (via.value("why", "") == "no stack check (a small leaf, or NOSPLIT)")
        EXPECT_FALSE(stack_check(it->second));
      ASSERT_EQ(via["ret_sites"].size(), e["ret_sites"].size());
      for (size_t k = 0; k < e["ret_sites"].size(); ++k) {
        const uint64_t ret = std::stoull(e["ret_sites"][k].get<std::string>(), nullptr, 16);
        const bool jump = via["ret_sites"][k] == "jump";
        EXPECT_TRUE(jump || via["ret_sites"][k] == "uprobe") << via;
        ++rets;
        jumps += jump;
        // The default flavour is no PIE: a stub below its image cannot be.
        if (jump)
          EXPECT_EQ(jump_epilogue(it->second, ret), Epilogue::Jump) << std::hex << ret;
        else if (entry && e["tail_jumps"].empty())
          EXPECT_NE(jump_epilogue(it->second, ret), Epilogue::Jump) << std::hex << ret;
      }
    }
  }
  if (!files) GTEST_SKIP() << "no fixture has its objdump listing";
  EXPECT_GT(jumps, 0u) << "of " << rets << " RETs";
}

TEST(FuncsProbeVia, TakesTheTrampolineBackendWithJsonOnly) {
  auto fx = all_fixtures("basic");
  if (fx.empty()) GTEST_SKIP() << "no basic fixtures built";
  RunResult a =
      run_command({gotap_binary(), "funcs", "--json", "--backend", "ebpf", fx[0].path}, 60);
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.err.find("takes trampoline only"), std::string::npos) << a.err;
  RunResult b = run_command({gotap_binary(), "funcs", "--backend", "trampoline", fx[0].path}, 60);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("needs --json"), std::string::npos) << b.err;
}

}  // namespace
}  // namespace gotap::testing
