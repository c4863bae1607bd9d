#include "core/plan/fork_child.h"

#include <algorithm>
#include <deque>
#include <set>
#include <string_view>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "core/plan/disasm.h"
#include "core/plan/x86_quick.h"

namespace gotap {
namespace {

// The child runs the rest of forkAndExecInChild1 after rawVforkSyscall returns in it (its
// sites are left whole: which of them only the parent runs is not known here), and what that
// rest calls, followed call by call: raw system calls and runtime_AfterForkInChild, which
// resets the signal handlers. What the parent's part calls (runtime_BeforeFork, write
// barriers, the allocator) is not followed: walked from forkAndExecInChild1, a third of the
// runtime was left out, casgstatus and mallocgc among it. Names of every release from 1.17.
constexpr std::string_view kChildWhole[] = {"syscall.forkAndExecInChild1",
                                            "syscall.rawVforkSyscall"};
constexpr std::string_view kChildCalls[] = {"syscall.RawSyscall",
                                            "syscall.RawSyscall6",
                                            "syscall.rawSyscallNoError",
                                            "syscall.runtime_AfterForkInChild",
                                            "runtime.syscall_runtime_AfterForkInChild",
                                            "syscall.capToMask",
                                            "syscall.capToIndex"};

bool not_followed(std::string_view name) {
  for (std::string_view p : {"runtime.panic", "runtime.gopanic", "runtime.throw", "runtime.fatal",
                             "runtime.morestack", "runtime.goPanic"})
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

// A bound on the walk: the child's code is a few dozen functions.
constexpr size_t kMaxFuncs = 256;

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> fork_child_ranges(const ElfFile& elf,
                                                             const Pclntab& pcln) {
  std::set<const PclnFunc*> seen;
  std::deque<const PclnFunc*> todo;
  for (std::string_view s : kChildWhole)
    for (const PclnFunc* f : pcln.lookup(s)) seen.insert(f);
  for (std::string_view s : kChildCalls)
    for (const PclnFunc* f : pcln.lookup(s))
      if (seen.insert(f).second) todo.push_back(f);
  while (!todo.empty() && seen.size() < kMaxFuncs) {
    const PclnFunc* f = todo.front();
    todo.pop_front();
    if (f->end <= f->entry || f->end - f->entry > (1u << 20)) continue;
    Bytes code = elf.read(f->entry, f->end - f->entry);
    for (size_t off = 0; off < code.size();) {
      QuickInsn q;
      unsigned len = 0;
      bool branch = false;
      if (quick_decode(code.data() + off, code.size() - off, q)) {
        len = q.len;
        // CALL rel32 (E8) and JMP rel32/rel8 out of the function; CALL r/m has no target.
        branch = (q.flow == QuickInsn::kCall && code[off] == 0xE8) || q.flow == QuickInsn::kJmp;
      } else {
        len = instruction_length(code.subspan(off), f->entry + off);
      }
      if (len == 0) break;  // undecodable: what follows is unknown
      if (branch) {
        const uint64_t to = f->entry + off + len + int64_t(q.rel);
        if (to < f->entry || to >= f->end) {
          const PclnFunc* g = pcln.find(to);
          if (g && !not_followed(g->name) && seen.insert(g).second) todo.push_back(g);
        }
      }
      off += len;
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const PclnFunc* f : seen) out.push_back({f->entry, f->end});
  std::sort(out.begin(), out.end());
  return out;
}

bool gccgo_fork_child(std::string_view name) {
  if (name.starts_with("syscall.forkAndExecInChild") || name.starts_with("syscall.raw_"))
    return true;
  for (std::string_view n : kChildWhole)
    if (name == n) return true;
  for (std::string_view n : kChildCalls)
    if (name == n) return true;
  return false;
}

}  // namespace gotap
