// Process control for the ptrace backend: launching a command traced from its first
// instruction, attaching to a running process (every thread, and every thread it creates
// later, through PTRACE_SEIZE + PTRACE_O_TRACECLONE), syscall injection and detaching.
// Only one thread ever stops at a time: nothing here stops the whole process except detach.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/ptrace/memory.h"
#include "core/result.h"

namespace gotap::ptrace {

// A decoded waitpid status.
struct WaitStatus {
  pid_t tid = 0;
  int raw = 0;
  bool exited() const;      // WIFEXITED or WIFSIGNALED
  bool stopped() const;     // WIFSTOPPED
  int stop_sig() const;     // WSTOPSIG
  int event() const;        // PTRACE_EVENT_* or 0
  bool group_stop() const;  // PTRACE_EVENT_STOP with a stopping signal
};

class Process {
 public:
  // fork + exec; returns with the only thread stopped at the exec (PTRACE_EVENT_EXEC).
  static Result<std::unique_ptr<Process>> launch(const std::vector<std::string>& argv);
  // Seizes every thread; returns with all threads running.
  static Result<std::unique_ptr<Process>> attach(pid_t pid);
  ~Process();

  pid_t pid() const { return pid_; }
  bool launched() const { return launched_; }
  TraceeMemory& mem() { return *mem_; }
  std::unordered_set<pid_t>& threads() { return threads_; }

  // The load bias of the main executable: AT_ENTRY - the ELF entry point.
  std::optional<uint64_t> load_bias(uint64_t elf_entry) const;

  // Stops thread `tid` with PTRACE_INTERRUPT and waits for it; other threads' events that
  // arrive meanwhile are handled by passing their signals through.
  Result<void> interrupt_and_wait(pid_t tid);

  // Runs syscall `nr` in the stopped thread `tid`, using a `syscall` instruction written
  // temporarily at `code_addr` (an address no other thread executes). Returns rax.
  Result<uint64_t> inject_syscall(pid_t tid, uint64_t code_addr, long nr,
                                  std::initializer_list<uint64_t> args);

  // A signal that arrived while a thread was held for injection; delivered on its next resume.
  int take_held_signal(pid_t tid);

  // Resumes a stopped thread with a signal (0 = none).
  static bool cont(pid_t tid, int sig);
  // Handles a stop that is not a probe hit: thread creation, group stops, signals.
  void handle_other_stop(const WaitStatus& ws);

  bool exec_seen() const { return exec_seen_; }
  int exit_code() const { return exit_code_; }
  void note_exit(const WaitStatus& ws);
  bool gone() const { return gone_; }

  // Interrupts every thread and detaches from each. `fix_trap` gets a thread that reported a
  // SIGTRAP (a probe hit taken before the breakpoints were restored): it returns true after
  // rewinding the registers, so that the original instruction runs and no signal is sent.
  void detach_all(const std::function<bool(pid_t, user_regs_struct&)>& fix_trap);

 private:
  Process() = default;
  pid_t pid_ = 0;
  bool launched_ = false;
  bool exec_seen_ = false;
  bool gone_ = false;
  int exit_code_ = 0;
  std::unique_ptr<TraceeMemory> mem_;
  std::unordered_set<pid_t> threads_;
  std::unordered_map<pid_t, int> held_signals_;
};

}  // namespace gotap::ptrace
