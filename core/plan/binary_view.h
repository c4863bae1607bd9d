// What a backend needs of the binary besides the probe sites: the file the probes go into,
// pc lookups for names and stacks, the types the plan's locations name. GoBinary::plan puts
// one in every ProbePlan, so that a backend runs from the plan alone.
//
// The pointers are into the GoBinary that made the plan, which owns them: a plan is valid for
// a run only while its GoBinary lives (frontends/cmd_trace.cpp and the tests keep it for the
// whole run). A plan built by hand has none (elf null); backends refuse it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/binary/rtype.h"

namespace gotap {

class ElfFile;
class TypeNames;
class Pclntab;
struct PclnFunc;
struct GccgoFunc;

// One source frame at a pc; an inlined call is a frame of its own.
struct SourceFrame {
  std::string func;
  std::string file;  // "" when the pclntab has no line for the pc
  int line = 0;
  bool inlined = false;
};

struct BinaryView {
  const ElfFile* elf = nullptr;
  const Pclntab* pclntab = nullptr;
  const TypeGraph* types = nullptr;       // DWARF's or the method tables', may be null
  bool dwarf = false;                     // `types` is DWARF's (every type the binary has)
  RtypeEnv rt;                            // the type descriptors (link-time), for dynamic types
  const TypeNames* type_names = nullptr;  // every descriptor by name (built on first use)
  // A gccgo program's functions, by entry (no pclntab): func_name's names.
  const std::vector<GccgoFunc>* gccgo_funcs = nullptr;

  const std::string& path() const;
  // Lookups by link-time pc (a running PIE's pc minus its load bias).
  const PclnFunc* func_at(uint64_t pc) const;
  std::string func_name(uint64_t pc) const;  // "" when no function contains pc
  // pc's frames, innermost first, at most `max`; empty when no function contains pc.
  std::vector<SourceFrame> frames_at(uint64_t pc, size_t max) const;

  // Where process pid loaded this file minus where it was linked: 0 unless PIE (then from
  // /proc/PID/maps); nullopt when pid does not map it.
  std::optional<uint64_t> load_bias(int pid) const;
};

}  // namespace gotap
