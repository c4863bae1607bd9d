// libFuzzer target: the value decoder on arbitrary tracee memory. A traced program's memory
// is whatever it is (torn writes, garbage, a hostile program): every type gotap decodes,
// including time.Time's and the runtime's type descriptors and map layouts, must decode it
// without crashing, hanging or undefined behaviour. The input is the memory, mapped at
// kBase; its first byte picks the type and the Go version.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/decode/value_decoder.h"
#include "core/output/value_text.h"

namespace {

using namespace gotap;

constexpr uint64_t kBase = 0x10000;

class InputMemory : public MemoryReader {
 public:
  InputMemory(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr < kBase || addr - kBase > n_ || n > n_ - (addr - kBase)) return false;
    std::memcpy(buf, p_ + (addr - kBase), n);
    return true;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

enum : TypeId {
  kInt = 1,
  kString,
  kSliceInt,
  kStruct,
  kPtr,
  kEface,
  kMap,
  kUint8,
  kBytes,
  kArr40Bytes,
  kArr3,
  kDuration,
  kTime,
  kPtrLoc,
  kLoc,
  kUint64,
  kPtrPtr,
  kCount
};

TypeGraph make_graph() {
  TypeGraph g;
  auto add = [&](GoType t) { g.add(std::move(t)); };
  add({.id = kInt, .name = "int", .kind = GoKind::Int, .size = 8});
  add({.id = kUint64, .name = "uint64", .kind = GoKind::Uint64, .size = 8});
  add({.id = kUint8, .name = "uint8", .kind = GoKind::Uint8, .size = 1});
  add({.id = kString, .name = "string", .kind = GoKind::String, .size = 16});
  add({.id = kSliceInt, .name = "[]int", .kind = GoKind::Slice, .size = 24, .elem = kInt});
  add({.id = kBytes, .name = "[]uint8", .kind = GoKind::Slice, .size = 24, .elem = kUint8});
  add({.id = kArr40Bytes,
       .name = "[40]uint8",
       .kind = GoKind::Array,
       .size = 40,
       .elem = kUint8,
       .count = 40});
  add({.id = kArr3, .name = "[3]int", .kind = GoKind::Array, .size = 24, .elem = kInt, .count = 3});
  add({.id = kStruct,
       .name = "main.S",
       .kind = GoKind::Struct,
       .size = 64,
       .fields = {{"raw", kBytes, 0},
                  {"addr", kInt, 24},
                  {"s", kString, 32},
                  {"p", kPtr, 48},
                  {"m", kMap, 56}}});
  add({.id = kPtr, .name = "*main.S", .kind = GoKind::Ptr, .size = 8, .elem = kStruct});
  add({.id = kPtrPtr, .name = "**main.S", .kind = GoKind::Ptr, .size = 8, .elem = kPtr});
  add({.id = kEface,
       .name = "interface {}",
       .kind = GoKind::Interface,
       .size = 16,
       .fields = {{"_type", 0, 0}, {"data", 0, 8}}});
  add({.id = kMap,
       .name = "map[string]int",
       .kind = GoKind::Map,
       .size = 8,
       .elem = kInt,
       .key = kString});
  add({.id = kDuration, .name = "time.Duration", .kind = GoKind::Int64, .size = 8});
  add({.id = kLoc, .name = "time.Location", .kind = GoKind::Struct, .size = 104});
  add({.id = kPtrLoc, .name = "*time.Location", .kind = GoKind::Ptr, .size = 8, .elem = kLoc});
  add({.id = kTime,
       .name = "time.Time",
       .kind = GoKind::Struct,
       .size = 24,
       .fields = {{"wall", kUint64, 0}, {"ext", kInt, 8}, {"loc", kPtrLoc, 16}}});
  g.index();
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const TypeGraph graph = make_graph();
  const uint8_t sel = data[0];
  InputMemory mem(data + 1, size - 1);
  DecodeEnv env;
  env.types = &graph;
  static const char* versions[] = {"go1.19", "go1.22", "go1.24", "go1.26"};
  env.rt.go = *GoVersion::parse(versions[(sel >> 5) & 3]);
  env.rt.types = kBase;
  env.rt.etypes = kBase + size - 1;
  env.rt.swiss_maps = sel & 0x80;
  DecodeLimits lim;
  lim.max_depth = 4;
  lim.max_elems = 8;
  lim.max_str = 32;
  ValueDecoder dec(mem, env, lim);
  TypeId t = 1 + (sel & 0x1f) % (kCount - 1);
  // The same bytes as a register-assembled value and as memory at kBase.
  nlohmann::json a = dec.decode(t, {data + 1, size - 1});
  nlohmann::json b = dec.decode_at(t, kBase);
  uint64_t w[2] = {};
  std::memcpy(w, data + 1, std::min<size_t>(16, size - 1));
  nlohmann::json c = dec.decode_interface(w[0], w[1], sel & 1);
  auto d = dec.guess_interface(w[0], w[1]);
  std::string s = value_to_text(a) + value_to_text(b) + value_to_text(c);
  if (d) s += value_to_text(*d);
  // The same words as a gccgo interface, read through libgo's descriptors (gccgo_rtype.h).
  DecodeEnv genv = env;
  genv.rt.gccgo = true;
  ValueDecoder gdec(mem, genv, lim);
  s += value_to_text(gdec.decode_interface(w[0], w[1], sel & 1));
  volatile size_t sink = s.size();
  (void)sink;
  return 0;
}
