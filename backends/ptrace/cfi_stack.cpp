#include "backends/ptrace/cfi_stack.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "core/sys/proc_maps.h"

namespace gotap::ptrace {

namespace {

// No separate debug file is looked for: a trace must not wait on a debuginfod server that
// DEBUGINFOD_URLS names, and the walk needs only .eh_frame, which is in the file itself.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word,
                 char**) {
  return -1;
}

// Files are reported with a descriptor (report_mapped): no path is opened by name.
int no_elf(Dwfl_Module*, void**, const char*, Dwarf_Addr, char**, Elf**) {
  return -1;
}

const Dwfl_Callbacks kReport = {no_elf, no_debuginfo, nullptr, nullptr};

// Every file pid maps code from, reported to dwfl where its first page is. Each is opened as
// the process maps it (/proc/PID/map_files), never by its path: a path may name another file
// by now, or a FIFO planted there, whose open would never return (elfutils' own
// dwfl_linux_proc_report opens the paths).
void report_mapped(Dwfl* dwfl, pid_t pid) {
  const std::vector<sys::Mapping> maps = sys::read_maps(pid);
  std::set<std::pair<std::string, uint64_t>> code;  // (dev, inode) of files mapped executable
  for (const auto& m : maps)
    if (m.inode && m.perms.size() > 2 && m.perms[2] == 'x') code.insert({m.dev, m.inode});
  std::set<std::pair<std::string, uint64_t>> done;
  for (const auto& m : maps) {
    if (m.offset != 0 || !code.count({m.dev, m.inode}) || !done.insert({m.dev, m.inode}).second)
      continue;
    const std::string link = fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end);
    // Not blocking, and a regular file only: a device a program maps executable is no ELF,
    // and its open must not wait.
    const int fd = open(link.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) continue;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      continue;
    }
    // On success the descriptor is dwfl's.
    if (!dwfl_report_elf(dwfl, m.path.c_str(), m.path.c_str(), fd, m.start, false)) close(fd);
  }
}

}  // namespace

// The unwinder's view of the one thread being walked (its registers as at the int3).
struct CfiCallbacks {
  static pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
    auto* s = static_cast<CfiStack*>(arg);
    if (s->handed_) return 0;
    s->handed_ = true;
    *thread_arg = s;
    return s->tid_;
  }
  static bool get_thread(Dwfl*, pid_t tid, void* arg, void** thread_arg) {
    auto* s = static_cast<CfiStack*>(arg);
    if (tid != s->tid_) return false;
    *thread_arg = s;
    return true;
  }
  static bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* out, void* arg) {
    return static_cast<CfiStack*>(arg)->mem_.read(addr, out, sizeof(*out));
  }
  // x86-64's DWARF numbering: rax rdx rcx rbx rsi rdi rbp rsp r8..r15, then the return
  // address column (16), which is the pc.
  static bool set_initial_registers(Dwfl_Thread* thread, void* arg) {
    const user_regs_struct& r = static_cast<CfiStack*>(arg)->regs_;
    const Dwarf_Word regs[17] = {r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8,
                                 r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip};
    return dwfl_thread_state_registers(thread, 0, 17, regs);
  }
  static const Dwfl_Thread_Callbacks kThread;
};

const Dwfl_Thread_Callbacks CfiCallbacks::kThread = {CfiCallbacks::next_thread,
                                                     CfiCallbacks::get_thread,
                                                     CfiCallbacks::memory_read,
                                                     CfiCallbacks::set_initial_registers,
                                                     nullptr,
                                                     nullptr};

CfiStack::CfiStack(pid_t pid, MemoryReader& mem) : pid_(pid), mem_(mem), names_(pid) {}

CfiStack::~CfiStack() {
  if (dwfl_) dwfl_end(dwfl_);
}

bool CfiStack::attach() {
  if (tried_) return dwfl_ != nullptr;
  tried_ = true;
  dwfl_ = dwfl_begin(&kReport);
  if (!dwfl_) return false;
  dwfl_report_begin(dwfl_);
  report_mapped(dwfl_, pid_);
  const bool ok = dwfl_report_end(dwfl_, nullptr, nullptr) == 0 &&
                  dwfl_attach_state(dwfl_, nullptr, pid_, &CfiCallbacks::kThread, this);
  if (!ok) {
    dwfl_end(dwfl_);
    dwfl_ = nullptr;
  }
  return ok;
}

std::vector<uint64_t> CfiStack::walk(pid_t tid, const user_regs_struct& regs, int max) {
  std::vector<uint64_t> pcs;
  if (max <= 0 || !attach()) return pcs;
  tid_ = tid;
  regs_ = regs;
  handed_ = false;
  struct Walk {
    std::vector<uint64_t>* pcs;
    size_t max;
  } w{&pcs, static_cast<size_t>(max)};
  // An error at the end of the walk (a frame without CFI: the goroutine's first) is its end.
  dwfl_getthread_frames(
      dwfl_, tid,
      [](Dwfl_Frame* frame, void* arg) -> int {
        auto* w = static_cast<Walk*>(arg);
        Dwarf_Addr pc = 0;
        if (!dwfl_frame_pc(frame, &pc, nullptr) || pc == 0) return DWARF_CB_ABORT;
        w->pcs->push_back(pc);
        return w->pcs->size() < w->max ? DWARF_CB_OK : DWARF_CB_ABORT;
      },
      &w);
  return pcs;
}

nlohmann::json CfiStack::frames(pid_t tid, const user_regs_struct& regs, int max) {
  nlohmann::json out = nlohmann::json::array();
  const std::vector<uint64_t> pcs = walk(tid, regs, max);
  for (size_t i = 0; i < pcs.size(); ++i) {
    // A caller's frame is named at its call, the byte before the return address.
    const uint64_t at = i == 0 ? pcs[i] : pcs[i] - 1;
    nlohmann::json f = {{"pc", pcs[i]}};
    std::string name = names_.name(at);
    Dwfl_Module* mod = dwfl_addrmodule(dwfl_, at);
    if (name.empty() && mod) {
      const char* sym = dwfl_module_addrname(mod, at);
      if (sym) name = sym;
    }
    f["func"] = name.empty() ? "?" : name;
    if (Dwfl_Line* line = mod ? dwfl_module_getsrc(mod, at) : nullptr) {
      int lineno = 0;
      const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
      if (file && lineno > 0) {
        f["file"] = file;
        f["line"] = lineno;
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gotap::ptrace
