// A site another tracer's uprobe holds with a reference counter (a USDT semaphore's offset):
// the kernel lets no uprobe with another counter share that offset, and says only EINVAL.
// Debian's bcc 0.26 sets such a counter on every uprobe by mistake (its Python passes six
// arguments to bpf_attach_uprobe, which takes seven: the seventh, the counter, is a stray
// register), so gotap beside bcc's trace-bpfcc met it on the function both traced, and
// refused to trace at all ("uprobe at offset 0x5760 ...: Invalid argument"). Now that site
// is left out, named on stderr and counted in the summary, and every other function is
// counted exactly. A function whose entry is held is left out whole: its returns would be
// calls without a start. The other tracer is played by a perf uprobe this test opens itself,
// with a counter at offset 6 as bcc's was (in the ELF header, which no writable mapping holds: the
// kernel writes nothing there), on a private copy of the fixture so that no other test's run
// meets it. The eBPF backend's (the trampoline backend's jump goes at the function's first
// byte, not at the entry probe past the stack check that this uprobe holds, and leaves it be:
// Trampoline.FunctionsOtherUprobesHoldGoOnUprobesBesideThem).
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <elf.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// The file offset of the site where gotap probes a function's entry (`funcs`' entry_probe,
// past the stack check), in the PT_LOAD segment that maps it; 0 when not found.
uint64_t entry_probe_offset(const std::string& bin, const std::string& func) {
  RunResult r = run_command({gotap_binary(), "funcs", "--json", bin, func});
  uint64_t vaddr = 0;
  for (const auto& e : events_in(r.out, "func"))
    if (e.value("func", "") == func) vaddr = std::stoull(e.value("entry_probe", "0"), nullptr, 16);
  if (vaddr == 0) return 0;
  const std::string elf = read_file(bin);
  Elf64_Ehdr eh;
  if (elf.size() < sizeof(eh)) return 0;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    const size_t at = eh.e_phoff + size_t(i) * eh.e_phentsize;
    if (at + sizeof(ph) > elf.size()) return 0;
    std::memcpy(&ph, elf.data() + at, sizeof(ph));
    if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
      return vaddr - ph.p_vaddr + ph.p_offset;
  }
  return 0;
}

// A perf uprobe at `offset` of `path`, in every process, with a reference counter at
// `ref_ctr` (perf's uprobe PMU takes it in config's high 32 bits). -1 when it cannot be had.
int counted_uprobe(const std::string& path, uint64_t offset, uint64_t ref_ctr) {
  std::ifstream type_file("/sys/bus/event_source/devices/uprobe/type");
  int type = -1;
  if (!(type_file >> type)) return -1;
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = static_cast<uint32_t>(type);
  attr.config = ref_ctr << 32;  // PERF_UPROBE_REF_CTR_OFFSET_SHIFT
  attr.config1 = reinterpret_cast<uint64_t>(path.c_str());
  attr.config2 = offset;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC));
}

// The fixture's own count of calls of each function: its "GT FUNC name=..." entry lines.
std::map<std::string, uint64_t> entries_of(const std::string& out) {
  std::map<std::string, uint64_t> n;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string gt, func, next;
    if (w >> gt >> func && gt == "GT" && !(w >> next && next == "->")) ++n[func];
  }
  return n;
}

TEST(CountedUprobe, ItsSiteIsLeftOutNamedAndTheRestCountExactly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF, perf uprobes)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const auto fixtures = all_fixtures("basic");
  const Fixture* fx = nullptr;
  for (const auto& f : fixtures)
    if (f.flavour == "default") fx = &f;
  if (!fx) GTEST_SKIP() << "no basic fixture built (tests/tools/build-fixtures.sh)";
  const std::string copy = "/tmp/gotap-counted-uprobe-" + std::to_string(getpid());
  std::filesystem::copy_file(fx->path, copy, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_all);
  const uint64_t off = entry_probe_offset(fx->path, "main.add");
  ASSERT_NE(off, 0u) << "no entry probe of main.add in " << fx->path;
  const int held = counted_uprobe(copy, off, 6);
  ASSERT_GE(held, 0) << "perf uprobe: " << std::strerror(errno);

  RunResult r = run_command({gotap_binary(), "count", "--backend", "ebpf", "--json", "main.add",
                             "main.square", "--", copy},
                            60);
  // trace probes main.add's returns too: with its entry held, they must go with it (each
  // would be a return without its call).
  RunResult t = run_command({gotap_binary(), "trace", "--backend", "ebpf", "--json", "main.add",
                             "main.square", "--", copy},
                            60);
  close(held);
  std::remove(copy.c_str());
  for (const RunResult* run : {&r, &t}) {
    ASSERT_EQ(run->exit_code, 0) << run->err;
    EXPECT_NE(run->err.find("hold another tracer's uprobe with a reference counter"),
              std::string::npos)
        << run->err;
    EXPECT_NE(run->err.find("the entry of main.add (the function is not traced)"),
              std::string::npos)
        << run->err;
    const auto summary = summary_in(run->out);
    EXPECT_GE(summary.value("skipped_sites", 0), 1) << summary.dump();
    EXPECT_EQ(summary.value("unmatched_returns", -1), 0) << summary.dump();
  }
  const auto truth = entries_of(r.out);
  ASSERT_GT(truth.at("main.square"), 0u) << r.out;
  ASSERT_GT(truth.at("main.add"), 0u) << r.out;
  std::map<std::string, uint64_t> got;
  for (const auto& e : events_in(r.out, "count")) got[e.value("func", "")] = e.value("count", 0ull);
  EXPECT_EQ(got["main.square"], truth.at("main.square")) << r.out;
  EXPECT_EQ(got["main.add"], 0u) << "main.add's entry was probed: " << r.out;
  std::map<std::string, uint64_t> entries, returns;
  for (const auto& e : events_in(t.out, "entry")) ++entries[e.value("func", "")];
  for (const auto& e : events_in(t.out, "return")) ++returns[e.value("func", "")];
  EXPECT_EQ(entries["main.square"], entries_of(t.out).at("main.square")) << t.out;
  EXPECT_EQ(returns["main.square"], entries["main.square"]) << t.out;
  EXPECT_EQ(entries["main.add"] + returns["main.add"], 0u) << t.out;
}

}  // namespace
}  // namespace gotap::testing
