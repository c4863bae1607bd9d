// Two tracers started at the same instant on one function of one process (issue 36). Each
// backend looks for another tracer's int3 at a site and then writes its own; an eBPF and a
// ptrace gotap started together could both look before either wrote, both print "Tracing",
// and both go blind: the kernel's uprobe took every trap of the ptrace gotap's int3 (it saw
// 0 calls), and that gotap's restore wrote the original byte over the uprobe's int3 (the eBPF
// one saw none after). 4 of 20 simultaneous starts on nats. Now a lock on the executable
// keeps one gotap's look and writes apart from another's (core/sys/image_lock.h), and ptrace
// writes an int3 only over the byte it read (a tracer that takes no lock, bpftrace).
//
// A test hook opens the window on purpose, so that each run lands in it: the first tracer, a
// gotap, waits between its look at the sites and its probes (GOTAP_TEST_PLACE_DELAY_MS), and
// the second one starts when it says so. Two gotaps of one backend start at once. Ground
// truth: the latency fixture's `spin` mode calls main.work (and so main.leaf) exactly as many
// times as asked and says so, and the kernel's view of the program's text after both tracers end.
// Every tracer that said "Tracing" must count every call made while it was there; the other is
// refused with one line and exit status 1.
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/bpf.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/binary/elf_file.h"
#include "core/sys/fd.h"
#include "core/sys/uprobe_holders.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

// One call per call of main.work, which spin makes: it has no stack check, so gotap probes
// its first byte, where bpftrace puts its uprobe too.
const char* const kFunc = "main.leaf";

// The newest Go's latency fixture; empty when not built.
std::string latency_path() {
  std::string path;
  for (const Fixture& f : all_fixtures("latency"))
    if (f.flavour == "default") path = f.path;
  return path;
}

// A private copy of the latency fixture, so that other tests' probes on the shared one, and
// the lock each gotap takes on it while placing its own, stay out of these (ctest runs two
// pairs at once).
struct Copy {
  std::string path;
  explicit Copy(const std::string& name) {
    path = "/tmp/gotap-" + name + "-" + std::to_string(getpid());
    std::filesystem::copy_file(latency_path(), path,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  ~Copy() { std::remove(path.c_str()); }
};

// One tracer: a gotap (`trace`, JSON into a file) or bpftrace counting the calls.
struct Tracer {
  std::string kind;  // "ptrace", "ebpf", "bpftrace"
  std::string file;  // gotap's output
  Child c;
  std::string err;
  bool tracing = false, settled = false;
  int exit_code = -1;

  void start(pid_t pid, const std::string& fixture, const std::vector<std::string>& env) {
    std::vector<std::string> argv = {"/usr/bin/env"};
    argv.insert(argv.end(), env.begin(), env.end());
    if (kind == "bpftrace") {
      argv.insert(argv.end(), {"bpftrace", "-p", std::to_string(pid), "-e",
                               // BEGIN runs once every probe is attached.
                               "BEGIN { printf(\"attached\\n\"); } uprobe:" + fixture + ":" +
                                   kFunc + " { @calls = count(); }"});
    } else {
      file = "/tmp/gotap-two-" + std::to_string(getpid()) + "-" + kind + "-" +
             std::to_string(reinterpret_cast<uintptr_t>(this) % 9973) + ".jsonl";
      argv.insert(argv.end(), {gotap_binary(), "trace", "--backend", kind, "--json", "-o", file,
                               "-p", std::to_string(pid), kFunc});
    }
    c = spawn(argv);
  }
  // Reads its stderr until `what` shows (or it ends).
  void wait_for(const std::string& what) { err += read_until(c.err, what, 60000); }
  // Until it traces or ends.
  void settle() {
    if (settled) return;
    settled = true;
    if (kind == "bpftrace") {
      const std::string out = read_until(c.out, "attached\n", 60000);
      tracing = out.find("attached\n") != std::string::npos;
      err += out;
      return;
    }
    if (err.find("Tracing ") == std::string::npos) wait_for("Tracing ");
    tracing = err.find("Tracing ") != std::string::npos;
    if (!tracing) reap();
  }
  void reap() {
    err += read_all(c.err);
    int st = 0;
    waitpid(c.pid, &st, 0);
    exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    close(c.out);
    close(c.err);
  }
  // Ends it as Ctrl-C does; how many calls it saw (entries). `paired`: as many returns.
  long stop(bool paired = true) {
    kill(c.pid, SIGINT);
    std::string out = read_all(c.out);
    reap();
    if (kind == "bpftrace") {
      const size_t at = out.find("@calls: ");
      return at == std::string::npos ? 0 : std::stol(out.substr(at + 8));
    }
    const std::string text = read_file(file);
    std::remove(file.c_str());
    const size_t entries = events_in(text, "entry").size();
    const size_t returns = events_in(text, "return").size();
    if (paired) EXPECT_EQ(entries, returns) << kind << "\n" << text.substr(0, 600);
    return long(entries);
  }
};

// stderr without what the test hooks add ("gotap: timing: ...", "gotap: test: ...").
std::string without_hooks(const std::string& err) {
  std::string out;
  size_t at = 0;
  while (at < err.size()) {
    size_t end = err.find('\n', at);
    end = end == std::string::npos ? err.size() : end + 1;
    const std::string line = err.substr(at, end - at);
    if (line.rfind("gotap: timing: ", 0) != 0 && line.rfind("gotap: test: ", 0) != 0) out += line;
    at = end;
  }
  return out;
}

struct Case {
  std::string name, first, second;
  // What the first tracer is started with, and what it says once the second may start ("":
  // both start at once).
  std::vector<std::string> first_env;
  std::string then;
  bool both_trace;  // else exactly one does
};

class TwoTracers : public ::testing::TestWithParam<Case> {};

TEST_P(TwoTracers, EachThatSaysTracingSeesEveryCall) {
  const Case& k = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (latency_path().empty()) GTEST_SKIP() << "no latency fixture (tests/tools/build-fixtures.sh)";
  const Copy copy("pair");
  const std::string& fixture = copy.path;
  // CI installs it (dev.sh TEST_PACKAGES).
  if (k.second == "bpftrace" && !file_exists("/usr/bin/bpftrace"))
    GTEST_SKIP() << "bpftrace is not installed";

  const int kRuns = 2, kBefore = 40, kAfter = 25;
  int landed = 0;
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    Spin spin(fixture);
    ASSERT_TRUE(spin.ask(5));
    Tracer a, b;
    a.kind = k.first;
    b.kind = k.second;
    a.start(spin.pid(), fixture, k.first_env);
    ASSERT_GT(a.c.pid, 0);
    if (!k.then.empty()) a.wait_for(k.then);
    b.start(spin.pid(), fixture, {});
    ASSERT_GT(b.c.pid, 0);
    if (b.kind == "bpftrace") {
      // bpftrace waits for nobody: it must be attached before the gotap's window closes, or
      // the run tests a later start, which no look can see (docs/cli.md); such a run (a slow
      // machine) is not counted.
      b.settle();
      a.err += read_until(a.c.err, "Tracing ", 0);
      if (!without_hooks(a.err).empty()) {
        kill(a.c.pid, SIGKILL);
        a.reap();
        b.stop();
        continue;
      }
    }
    a.settle();
    b.settle();
    ++landed;

    // Calls while both are there; then the first goes, and the second must still see each.
    ASSERT_TRUE(spin.ask(kBefore));
    const long seen_a = a.tracing ? a.stop() : 0;
    ASSERT_TRUE(spin.ask(kAfter));
    const long seen_b = b.tracing ? b.stop() : 0;

    for (const Tracer* t : {&a, &b}) {
      if (t->tracing) continue;
      // Refused: one line, exit status 1 (docs/cli.md, "Sites another tracer holds").
      const std::string said = without_hooks(t->err);
      EXPECT_EQ(t->exit_code, 1) << t->kind << ": " << t->err;
      EXPECT_EQ(said.rfind("gotap: ", 0), 0u) << t->kind << ": " << t->err;
      EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1) << t->kind << ": " << t->err;
    }
    if (k.both_trace) {
      EXPECT_TRUE(a.tracing && b.tracing) << a.err << "\n" << b.err;
    } else {
      EXPECT_NE(a.tracing, b.tracing) << k.first << ": " << a.err << "\n"
                                      << k.second << ": " << b.err;
    }
    if (a.tracing) EXPECT_EQ(seen_a, kBefore) << k.first << ": " << a.err;
    if (b.tracing) EXPECT_EQ(seen_b, kBefore + kAfter) << k.second << ": " << b.err;
    EXPECT_EQ(a.exit_code, a.tracing ? 0 : 1) << a.err;
    if (b.kind != "bpftrace") EXPECT_EQ(b.exit_code, b.tracing ? 0 : 1) << b.err;

    // Nothing of either is left in the program, which runs on as before.
    const TextCompare text = compare_text(spin.pid());
    EXPECT_GT(text.bytes, 0u);
    EXPECT_EQ(text.differing, 0u) << text.first;
    EXPECT_TRUE(spin.ask(3));
    EXPECT_TRUE(spin.ends_well());
  }
  EXPECT_GT(landed, 0) << "no run had the second tracer start inside the first one's window";
}

// The first gotap waits between its look at the sites and its probes, and says when; long
// enough for bpftrace to start and attach (about a second; more under load).
const std::vector<std::string> kWaitAfterTheLook = {"GOTAP_TEST_PLACE_DELAY_MS=700"};
const std::vector<std::string> kWaitLongAfterTheLook = {"GOTAP_TEST_PLACE_DELAY_MS=3000"};
const char* const kLooked = "gotap: test: placing the probes in";

INSTANTIATE_TEST_SUITE_P(
    Pairs, TwoTracers,
    ::testing::Values(
        Case{"PtraceAndPtraceAtOnce", "ptrace", "ptrace", {}, "", false},
        Case{"EbpfAndEbpfAtOnce", "ebpf", "ebpf", {}, "", true},
        Case{"EbpfLooksFirstThenPtrace", "ebpf", "ptrace", kWaitAfterTheLook, kLooked, false},
        Case{"PtraceLooksFirstThenEbpf", "ptrace", "ebpf", kWaitAfterTheLook, kLooked, false},
        Case{"PtraceLooksFirstThenBpftrace", "ptrace", "bpftrace", kWaitLongAfterTheLook, kLooked,
             false}),
    [](const auto& info) { return info.param.name; });

// A uprobe that comes after a ptrace trace placed its int3s takes their hits (the kernel serves
// it first, and the ptrace trace cannot know): an eBPF trace of every process that runs the
// binary (--all) does not look for a ptrace tracer's int3s. When the ptrace trace ends, the
// int3 is that uprobe's too, and stays: the eBPF trace goes on counting every call. The
// binary is a copy of its own, so that --all reaches no other test's process.
TEST(TwoTracersLate, AUprobeThatCameLaterKeepsItsInt3ThroughAPtraceTracesEnd) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  const std::string fixture = latency_path();
  if (fixture.empty()) GTEST_SKIP() << "no latency fixture (tests/tools/build-fixtures.sh)";
  const std::string copy = "/tmp/gotap-late-" + std::to_string(getpid());
  ASSERT_TRUE(std::filesystem::copy_file(fixture, copy));
  std::filesystem::permissions(copy, std::filesystem::perms::owner_all);
  {
    Spin spin(copy);
    ASSERT_TRUE(spin.ask(5));
    Tracer pt;
    pt.kind = "ptrace";
    pt.start(spin.pid(), copy, {});
    pt.settle();
    ASSERT_TRUE(pt.tracing) << pt.err;
    ASSERT_TRUE(spin.ask(10));

    const std::string out = copy + ".count.jsonl";
    Child all = spawn({gotap_binary(), "count", "--backend", "ebpf", "--json", "-o", out, "--all",
                       "--binary", copy, kFunc});
    ASSERT_GT(all.pid, 0);
    std::string err = read_until(all.err, "Tracing ", 60000);
    ASSERT_NE(err.find("Tracing "), std::string::npos) << err;
    ASSERT_TRUE(spin.ask(20));
    // The ptrace trace saw the calls before the uprobe came, and none after (their returns
    // still: the count probes entries only).
    EXPECT_EQ(pt.stop(false), 10) << pt.err;
    EXPECT_EQ(pt.exit_code, 0) << pt.err;
    EXPECT_NE(pt.err.find("gotap: warning: another tracer put a uprobe on 1 of the probe sites"),
              std::string::npos)
        << pt.err;
    ASSERT_TRUE(spin.ask(30));
    kill(all.pid, SIGINT);
    err += read_all(all.err);
    int st = 0;
    waitpid(all.pid, &st, 0);
    close(all.out);
    close(all.err);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << err;
    auto counts = events_in(read_file(out), "count");
    std::remove(out.c_str());
    ASSERT_EQ(counts.size(), 1u) << err;
    EXPECT_EQ(counts[0].value("count", -1), 50) << err;

    const TextCompare text = compare_text(spin.pid());
    EXPECT_GT(text.bytes, 0u);
    EXPECT_EQ(text.differing, 0u) << text.first;
    EXPECT_TRUE(spin.ends_well());
  }
  std::remove(copy.c_str());
}

// A uprobe_multi link of a BPF program that does nothing, on `file` at file offset `offset`,
// made for process `pid` (0: every process), as bpftrace or another gotap would hold one; it
// goes with the object. The attr is Linux 6.6's (Debian 12's linux/bpf.h predates it).
class BareUprobe {
 public:
  BareUprobe(const std::string& file, uint64_t offset, pid_t pid) : offset_(offset) {
    struct bpf_insn insns[2] = {};
    insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
    insns[1].code = BPF_JMP | BPF_EXIT;
    union bpf_attr load {};
    load.prog_type = BPF_PROG_TYPE_KPROBE;
    load.expected_attach_type = kTraceUprobeMulti;
    load.insns = reinterpret_cast<uint64_t>(insns);
    load.insn_cnt = 2;
    load.license = reinterpret_cast<uint64_t>("GPL");
    prog_ = sys::Fd(static_cast<int>(syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load)));
    if (prog_.get() < 0) return;
    struct {
      uint32_t prog_fd, target_fd, attach_type, flags;
      uint64_t path, offsets, ref_ctr_offsets, cookies;
      uint32_t cnt, multi_flags, pid, pad;
    } create{};
    create.prog_fd = static_cast<uint32_t>(prog_.get());
    create.attach_type = kTraceUprobeMulti;
    create.path = reinterpret_cast<uint64_t>(file.c_str());
    create.offsets = reinterpret_cast<uint64_t>(&offset_);
    create.cnt = 1;
    create.pid = static_cast<uint32_t>(pid);
    link_ = sys::Fd(static_cast<int>(syscall(SYS_bpf, BPF_LINK_CREATE, &create, sizeof create)));
  }
  bool ok() const { return link_.get() >= 0; }

 private:
  static constexpr uint32_t kTraceUprobeMulti = 48;  // BPF_TRACE_UPROBE_MULTI
  uint64_t offset_;
  sys::Fd prog_, link_;
};

// A process that only waits to be killed.
pid_t idle_child() {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

void end_child(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// The file offset of kFunc's first byte, where gotap's probe goes.
uint64_t probe_offset(const std::string& path) {
  auto elf = ElfFile::open(path);
  if (!elf.ok()) return 0;
  const ElfSymbol* sym = (*elf)->symbol(kFunc);
  if (!sym) return 0;
  return (*elf)->vaddr_to_offset(sym->value).value_or(0);
}

// Who holds a uprobe that reaches a process: the kernel reports the pid of a uprobe_multi link
// whose process is gone as 0, as it does for one made for every process, and only the second
// puts int3s into the process (CI, stop 41: a ptrace trace refused for an eBPF trace of
// another process of the binary that had just ended).
TEST(TwoTracersHolders, OnlyUprobesThatReachTheProcessAreItsHolders) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (BPF)";
  if (latency_path().empty()) GTEST_SKIP() << "no latency fixture (tests/tools/build-fixtures.sh)";
  Copy copy("holders");
  const uint64_t off = probe_offset(copy.path);
  ASSERT_NE(off, 0u);
  const pid_t target = idle_child(), other = idle_child(), gone = idle_child();
  struct Want {
    const char* what;
    pid_t made_for;
    bool holds;
  };
  for (const Want& w :
       {Want{"the process", target, true}, Want{"every process", 0, true},
        Want{"another process", other, false}, Want{"a process that is gone", gone, false}}) {
    SCOPED_TRACE(w.what);
    BareUprobe link(copy.path, off, w.made_for);
    ASSERT_TRUE(link.ok()) << strerror(errno);
    if (w.made_for == gone) end_child(gone);
    // Any process's view lists the link (a ptrace gotap names the holder of a taken site so).
    EXPECT_EQ(sys::uprobe_holders(copy.path).count(off), 1u);
    EXPECT_EQ(sys::uprobe_holders(copy.path, target, /*certain=*/true).count(off),
              w.holds ? 1u : 0u);
    EXPECT_EQ(sys::uprobe_holders(copy.path, target).count(off), w.holds ? 1u : 0u);
  }
  end_child(target);
  end_child(other);
}

// The same as a trace: a ptrace gotap started while that link is there traces every call and
// leaves the program's text as it was.
TEST(TwoTracersHolders, AUprobeOfAProcessThatIsGoneLeavesAPtraceTraceAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (latency_path().empty()) GTEST_SKIP() << "no latency fixture (tests/tools/build-fixtures.sh)";
  Copy copy("gone");
  const uint64_t off = probe_offset(copy.path);
  ASSERT_NE(off, 0u);
  const pid_t gone = idle_child();
  BareUprobe link(copy.path, off, gone);
  ASSERT_TRUE(link.ok()) << strerror(errno);
  end_child(gone);
  Spin spin(copy.path);
  ASSERT_TRUE(spin.ask(5));
  Tracer pt;
  pt.kind = "ptrace";
  pt.start(spin.pid(), copy.path, {});
  pt.settle();
  ASSERT_TRUE(pt.tracing) << pt.err;
  ASSERT_TRUE(spin.ask(10));
  EXPECT_EQ(pt.stop(), 10) << pt.err;
  EXPECT_EQ(pt.exit_code, 0) << pt.err;
  EXPECT_EQ(without_hooks(pt.err).find("another tracer"), std::string::npos) << pt.err;
  const TextCompare text = compare_text(spin.pid());
  EXPECT_GT(text.bytes, 0u);
  EXPECT_EQ(text.differing, 0u) << text.first;
  EXPECT_TRUE(spin.ends_well());
}

// The address of `func`'s first RET, as Go's own objdump of the fixture (beside it) lists it.
uint64_t first_ret(const std::string& fixture, const std::string& func) {
  std::ifstream in(fixture + ".objdump");
  static const std::regex ret(R"(\s(0x[0-9a-f]+)\s+c3\s+RET\b)");
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("TEXT ", 0) == 0) {
      inside = line.rfind("TEXT " + func + "(SB)", 0) == 0;
      continue;
    }
    std::smatch m;
    if (inside && std::regex_search(line, m, ret)) return std::stoull(m[1], nullptr, 16);
  }
  return 0;
}

// A debugger's int3 on a RET (not the entry) of a function an eBPF trace times, the debugger
// attached: the trace leaves that site out and says so, and the int3 is still there after
// the trace ended. Before, only entries were looked at: a uprobe went over the int3 (the
// kernel took the debugger's traps), and its removal wrote the file's byte over it.
TEST(TwoTracersHolders, ADebuggersInt3OnARetStaysThroughAnEbpfTrace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (latency_path().empty()) GTEST_SKIP() << "no latency fixture (tests/tools/build-fixtures.sh)";
  const uint64_t ret = first_ret(latency_path(), "main.work");
  ASSERT_NE(ret, 0u) << "no RET of main.work in " << latency_path() << ".objdump";
  Copy copy("debugger");
  Spin spin(copy.path);
  ASSERT_TRUE(spin.ask(2));
  // The debugger: attached to the program (its leader, as TracerPid shows), its int3 on the
  // RET. The program is idle until asked: nothing runs into it.
  ASSERT_EQ(ptrace(PTRACE_SEIZE, spin.pid(), nullptr, nullptr), 0) << strerror(errno);
  sys::Fd mem(open(("/proc/" + std::to_string(spin.pid()) + "/mem").c_str(), O_RDWR));
  ASSERT_GE(mem.get(), 0);
  uint8_t orig = 0, now = 0;
  const uint8_t int3 = 0xcc;
  ASSERT_EQ(pread(mem.get(), &orig, 1, off_t(ret)), 1);
  ASSERT_EQ(orig, 0xc3);
  ASSERT_EQ(pwrite(mem.get(), &int3, 1, off_t(ret)), 1);
  RunResult r = run_command({gotap_binary(), "latency", "--backend", "ebpf", "-d", "1", "-p",
                             std::to_string(spin.pid()), "main.work"},
                            60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 site(s) left out"), std::string::npos) << r.err;
  ASSERT_EQ(pread(mem.get(), &now, 1, off_t(ret)), 1);
  EXPECT_EQ(now, 0xcc) << "the debugger's int3 is gone";
  // The debugger puts its byte back and goes.
  ASSERT_EQ(pwrite(mem.get(), &orig, 1, off_t(ret)), 1);
  ASSERT_EQ(ptrace(PTRACE_INTERRUPT, spin.pid(), nullptr, nullptr), 0);
  int st = 0;
  ASSERT_EQ(waitpid(spin.pid(), &st, __WALL), spin.pid());
  ASSERT_EQ(ptrace(PTRACE_DETACH, spin.pid(), nullptr, nullptr), 0) << strerror(errno);
  EXPECT_TRUE(spin.ask(3));
  const TextCompare text = compare_text(spin.pid());
  EXPECT_EQ(text.differing, 0u) << text.first;
  EXPECT_TRUE(spin.ends_well());
}

}  // namespace
}  // namespace gotap::testing
