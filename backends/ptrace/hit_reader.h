// What a probe hit reads of the tracee, copied in one system call while its thread is
// stopped (issue 22, levers 2 and 3): the goroutine's g, the stack words of the arguments
// or results, and the bytes of their strings, planned once per function from the argument
// locations. Decoding reads the copy; values it does not cover are read live while the
// thread is still stopped. A function whose every value the copy covers (numbers, booleans,
// strings) is decoded after its thread resumed, from the copy alone: never torn.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <vector>

#include "backends/ptrace/breakpoints.h"
#include "backends/ptrace/memory.h"
#include "core/plan/plan.h"

namespace gotap::ptrace {

// A MemoryReader over the copy of a hit, falling back to live reads while that is allowed.
class HitMemory : public MemoryReader {
 public:
  explicit HitMemory(TraceeMemory& live) : live_(live) {}
  bool read(uint64_t addr, void* buf, size_t n) override;
  // Live, in batches, while live reads are allowed (the copy holds no map's groups).
  size_t read_blocks(const uint64_t* addrs, size_t size, void* out, size_t n) override;

  struct Range {
    uint64_t addr = 0;
    uint32_t size = 0;
  };
  struct Region {
    uint64_t addr;
    std::vector<uint8_t> bytes;
  };
  // Drops the previous copy and copies `ranges`: one process_vm_readv for all of them (a
  // range it could not read is retried alone, so one bad pointer loses nothing else).
  void copy(const std::vector<Range>& ranges);
  // Appends to the copy (the second level: strings whose headers were on the stack).
  void copy_more(const std::vector<Range>& ranges);
  void clear() {
    regions_.clear();
    complete_ = true;
  }
  // Whether every range asked for was copied or found unreadable (none left out for room).
  bool complete() const { return complete_; }
  // false once the thread resumed: a read the copy does not cover fails.
  void set_live(bool live) { live_ok_ = live; }

  uint64_t syscalls() const { return syscalls_; }
  uint64_t misses() const { return misses_; }

  // The copy, handed to another reader (EventQueue), and taken from one.
  std::vector<Region> take() {
    std::vector<Region> r = std::move(regions_);
    regions_.clear();
    return r;
  }
  std::vector<Region> regions() const { return regions_; }
  void adopt(std::vector<Region> regions) { regions_ = std::move(regions); }

 private:
  TraceeMemory& live_;
  std::vector<Region> regions_;
  bool live_ok_ = true;
  bool complete_ = true;
  uint64_t syscalls_ = 0;  // process_vm_readv and pread calls, copies and live reads
  uint64_t misses_ = 0;    // reads after the resume that the copy did not cover
};

// Per function and side (arguments at the entry, results at a RET): what a hit copies.
struct HitPlan {
  bool has_stack = false;
  int64_t stack_lo = 0, stack_hi = 0;  // [sp + lo, sp + hi): every stack piece
  // Strings: where their pointer and length words are (value offsets 0 and 8).
  struct Str {
    const ParamLoc* p = nullptr;
  };
  std::vector<Str> strs;
  // Every value decodes from registers and the copy alone: decoding may follow the resume.
  bool copyable = true;
};

HitPlan plan_hit(const std::vector<ParamLoc>& params);

// Plans every function once; at a hit, copies what its roles read.
class HitReader {
 public:
  // `values` false: no hit reads arguments or results (count and latency without a
  // condition), so only the g is copied and no function is planned (a whole binary's plans
  // are 5 MB).
  HitReader(TraceeMemory& live, const ProbePlan& plan, uint32_t max_str, bool values = true);
  HitMemory& mem() { return mem_; }
  // Copies for the hit at `s` (registers as at the int3; `abi_internal`: R14 holds the g).
  void gather(const Site& s, const user_regs_struct& r);
  // Whether func's arguments (or results) decode from the copy alone.
  bool copyable(int func, bool results) const;
  uint64_t hits() const { return hits_; }

 private:
  const ProbePlan& plan_;
  HitMemory mem_;
  uint32_t max_str_;
  uint32_t g_end_ = 0;  // bytes of the g that GoroutineReader reads
  std::vector<HitPlan> args_, results_;
  std::vector<HitMemory::Range> ranges_;
  uint64_t hits_ = 0;
};

}  // namespace gotap::ptrace
