// The value decoder on synthetic tracee memory laid out as the Go runtime lays it out
// (strings, slices, structs, pointers, interfaces through type descriptors, bucket and swiss
// maps), and the runtime type reader against the DWARF of real fixture binaries.
#include <cstring>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "core/binary/rtype.h"
#include "core/decode/value_decoder.h"
#include "core/events/typed_events.h"
#include "core/model/json_utf8.h"
#include "core/output/output_views.h"
#include "core/output/record.h"
#include "core/output/value_text.h"
#include "core/output/writers.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using nlohmann::json;

class FakeMemory : public MemoryReader {
 public:
  bool read(uint64_t addr, void* buf, size_t n) override {
    auto it = regions_.upper_bound(addr);
    if (it == regions_.begin()) return false;
    --it;
    const auto& [base, bytes] = *it;
    if (addr < base || addr - base + n > bytes.size()) return false;
    std::memcpy(buf, bytes.data() + (addr - base), n);
    return true;
  }
  void put(uint64_t addr, const void* p, size_t n) {
    std::vector<uint8_t> b(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    regions_[addr] = std::move(b);
  }
  void put_u64s(uint64_t addr, std::vector<uint64_t> w) { put(addr, w.data(), w.size() * 8); }
  void put_str(uint64_t addr, const std::string& s) { put(addr, s.data(), s.size()); }

 private:
  std::map<uint64_t, std::vector<uint8_t>> regions_;
};

// A tiny type graph: int, string, []int, struct P{X int; S string}, *P, *int, interface{}.
enum : TypeId {
  kInt = 1,
  kString,
  kSliceInt,
  kP,
  kPtrP,
  kEface,
  kPtrInt,
  kMapStrInt,
  kArr3,
  kUint8,
  kBytes,
  kArr4Bytes,
  kMarks,
  kDuration,
  kTime,
  kPtrLoc,
  kLoc,
  kUint64,
  kArrBigBytes,
  kArr16Maps,
};

TypeGraph make_graph() {
  TypeGraph g;
  auto add = [&](GoType t) { g.add(std::move(t)); };
  add({.id = kInt, .name = "int", .kind = GoKind::Int, .size = 8});
  add({.id = kString, .name = "string", .kind = GoKind::String, .size = 16});
  add({.id = kSliceInt, .name = "[]int", .kind = GoKind::Slice, .size = 24, .elem = kInt});
  add({.id = kP,
       .name = "main.P",
       .kind = GoKind::Struct,
       .size = 24,
       .fields = {{"X", kInt, 0}, {"S", kString, 8}}});
  add({.id = kPtrP, .name = "*main.P", .kind = GoKind::Ptr, .size = 8, .elem = kP});
  add({.id = kEface,
       .name = "interface {}",
       .kind = GoKind::Interface,
       .size = 16,
       .fields = {{"_type", 0, 0}, {"data", 0, 8}}});
  add({.id = kPtrInt, .name = "*int", .kind = GoKind::Ptr, .size = 8, .elem = kInt});
  add({.id = kMapStrInt,
       .name = "map[string]int",
       .kind = GoKind::Map,
       .size = 8,
       .elem = kInt,
       .key = kString});
  add({.id = kArr3, .name = "[3]int", .kind = GoKind::Array, .size = 24, .elem = kInt, .count = 3});
  add({.id = kUint8, .name = "uint8", .kind = GoKind::Uint8, .size = 1});
  // DWARF names a []byte's element through its array field, as the Go compiler writes it.
  add({.id = kBytes, .name = "[]uint8", .kind = GoKind::Slice, .size = 24, .elem = kUint8});
  add({.id = kArr4Bytes,
       .name = "[4]uint8",
       .kind = GoKind::Array,
       .size = 4,
       .elem = kUint8,
       .count = 4});
  // A struct whose field names are gotap's marks, in an order that is not sorted.
  add({.id = kMarks,
       .name = "main.Marks",
       .kind = GoKind::Struct,
       .size = 64,
       .fields = {{"raw", kBytes, 0},
                  {"addr", kInt, 24},
                  {"location", kString, 32},
                  {"elem", kPtrInt, 48},
                  {"unreadable", kInt, 56}}});
  add({.id = kUint64, .name = "uint64", .kind = GoKind::Uint64, .size = 8});
  add({.id = kArrBigBytes,
       .name = "[100000]uint8",
       .kind = GoKind::Array,
       .size = 100000,
       .elem = kUint8,
       .count = 100000});
  add({.id = kArr16Maps,
       .name = "[16]map[string]int",
       .kind = GoKind::Array,
       .size = 128,
       .elem = kMapStrInt,
       .count = 16});
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

ParamLoc reg_param(const char* name, TypeId t, uint64_t size, std::vector<LocPiece> pieces) {
  ParamLoc p;
  p.name = name;
  p.type = t;
  p.size = size;
  p.loc.pieces = std::move(pieces);
  return p;
}

LocPiece ireg(int r, uint32_t off) {
  return {LocPiece::IntReg, uint8_t(r), 0, off, 8};
}

constexpr uint64_t kTypes = 0x500000;
constexpr uint64_t kBuckets = 0x100000000;

// A type descriptor at kTypes + off with name `name` at kTypes + name_off.
void put_rtype(FakeMemory& m, const GoVersion& v, uint64_t off, GoKind kind, uint64_t size,
               bool direct, const std::string& name, uint64_t name_off, uint64_t elem = 0) {
  uint8_t t[56] = {};
  std::memcpy(t, &size, 8);
  uint8_t k = static_cast<uint8_t>(kind);
  uint8_t tflag = 0;
  if (v.at_least(1, 26))
    tflag |= direct ? 0x20 : 0;
  else
    k |= direct ? 0x20 : 0;
  t[20] = tflag;
  t[21] = t[22] = static_cast<uint8_t>(size >= 8 ? 8 : size ? size : 1);  // align, field align
  t[23] = k;
  int32_t str = static_cast<int32_t>(name_off);
  std::memcpy(t + 40, &str, 4);
  std::memcpy(t + 48, &elem, 8);
  m.put(kTypes + off, t, sizeof t);
  std::string n;
  n.push_back(0);
  n.push_back(static_cast<char>(name.size()));
  n += name;
  m.put_str(kTypes + name_off, n);
}

DecodeEnv env_for(const TypeGraph* g, const GoVersion& v, bool swiss = false) {
  DecodeEnv e;
  e.types = g;
  e.rt.go = v;
  e.rt.types = kTypes;
  e.rt.etypes = kTypes + 0x10000;
  e.rt.swiss_maps = swiss;
  return e;
}

GoVersion ver(int minor) {
  return *GoVersion::parse("go1." + std::to_string(minor));
}

TEST(ValueDecoder, ScalarsStringsSlicesStructsPointers) {
  TypeGraph g = make_graph();
  FakeMemory m;
  m.put_str(0x1000, "hello");
  m.put_u64s(0x2000, {10, 20, 30, 40});
  m.put_u64s(0x3000, {7, 0x1000, 5});  // P{X: 7, S: "hello"}
  ValueDecoder d(m, env_for(&g, ver(22)), DecodeLimits{});
  RegState rs;
  uint64_t regs[] = {uint64_t(-42), 0x1000, 5, 0x2000, 3, 4, 0x3000, 0, 0};
  std::memcpy(rs.gp, regs, sizeof regs);
  EXPECT_EQ(d.decode_param(reg_param("i", kInt, 8, {ireg(0, 0)}), rs)["value"], -42);
  EXPECT_EQ(d.decode_param(reg_param("s", kString, 16, {ireg(1, 0), ireg(2, 8)}), rs)["value"],
            "hello");
  json sl = d.decode_param(reg_param("sl", kSliceInt, 24, {ireg(3, 0), ireg(4, 8), ireg(5, 16)}),
                           rs)["value"];
  EXPECT_EQ(sl, json({{"len", 3}, {"cap", 4}, {"elems", {10, 20, 30}}}));
  json p = d.decode_param(reg_param("p", kPtrP, 8, {ireg(6, 0)}), rs)["value"];
  EXPECT_EQ(p["addr"], "0x3000");
  EXPECT_EQ(p["elem"], json::parse(R"({"fields":[{"name":"X","value":7},
                                              {"name":"S","value":"hello"}]})"));
  EXPECT_TRUE(d.decode_param(reg_param("nil", kPtrP, 8, {ireg(7, 0)}), rs)["value"].is_null());
  // A stack-resident argument.
  m.put_u64s(0x7000, {0xdead, 1, 2, 3});
  rs.sp = 0x7000;
  ParamLoc arr;
  arr.name = "a";
  arr.type = kArr3;
  arr.size = 24;
  arr.loc.pieces = {{LocPiece::Stack, 0, 8, 0, 24}};
  EXPECT_EQ(d.decode_param(arr, rs)["value"], json({1, 2, 3}));
  // gccgo's results: a slice in the caller's buffer at 8 from the address rax holds, and a
  // byte in the second byte of rbx (the first is another result's).
  m.put_u64s(0x5000, {0xdead, 0x2000, 3, 4});
  rs.gp[0] = 0x5000;
  json mem = d.decode_param(reg_param("sl", kSliceInt, 24, {{LocPiece::RegMem, 0, 8, 0, 24}}),
                            rs)["value"];
  EXPECT_EQ(mem, json({{"len", 3}, {"cap", 4}, {"elems", {10, 20, 30}}}));
  rs.gp[1] = 0xffffffffffff2a07;
  EXPECT_EQ(
      d.decode_param(reg_param("b", kUint8, 1, {{LocPiece::IntReg, 1, 0, 0, 1, 1}}), rs)["value"],
      0x2a);
  EXPECT_EQ(
      d.decode_param(reg_param("b", kUint8, 1, {{LocPiece::IntReg, 1, 0, 0, 1}}), rs)["value"], 7);
}

TEST(ValueDecoder, LimitsAndUtf8) {
  TypeGraph g = make_graph();
  FakeMemory m;
  std::string s =
      "ab\xC3\xA9"
      "cd\xFF";  // "abécd" + an invalid byte
  m.put_str(0x1000, s);
  uint64_t ptrs[2] = {0x1000, s.size()};
  DecodeLimits lim;
  lim.max_str = 3;  // cuts inside é: the partial character is dropped
  ValueDecoder d(m, env_for(&g, ver(22)), lim);
  json v = d.decode(kString, {reinterpret_cast<uint8_t*>(ptrs), 16});
  EXPECT_EQ(v, json({{"str", "ab"}, {"len", s.size()}, {"truncated", true}}));
  ValueDecoder full(m, env_for(&g, ver(22)), DecodeLimits{});
  EXPECT_EQ(full.decode(kString, {reinterpret_cast<uint8_t*>(ptrs), 16}),
            s);  // the program's bytes, 0xFF included (the writers escape it)
  // Pointer depth: **P-like chains stop at max_depth with the address only.
  m.put_u64s(0x2000, {7, 0x1000, 2});
  uint64_t p = 0x2000;
  DecodeLimits d0;
  d0.max_depth = 0;
  ValueDecoder shallow(m, env_for(&g, ver(22)), d0);
  EXPECT_EQ(shallow.decode(kPtrP, {reinterpret_cast<uint8_t*>(&p), 8}), json({{"addr", "0x2000"}}));
  // Slices beyond max_elems are cut and marked.
  m.put_u64s(0x3000, {1, 2, 3, 4, 5});
  uint64_t sl[3] = {0x3000, 5, 5};
  DecodeLimits two;
  two.max_elems = 2;
  ValueDecoder few(m, env_for(&g, ver(22)), two);
  EXPECT_EQ(few.decode(kSliceInt, {reinterpret_cast<uint8_t*>(sl), 24}),
            json({{"len", 5}, {"cap", 5}, {"elems", {1, 2}}, {"truncated", true}}));
}

// What a writer prints for one entry (and its return) whose parameter "s" holds `v`.
std::string written(const std::string& format, const json& v, bool typed) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    auto sink = format == "record" ? make_record_writer(f, json::object()) : make_output(format, f);
    CallEntry e(CallSite{.ts_ns = 10, .pid = 7, .tid = 7, .goid = 1, .func = "main.f"});
    e.args.push_back(Param{"s", "string", v});
    CallReturn r(CallSite{.ts_ns = 20, .pid = 7, .tid = 7, .goid = 1, .func = "main.f"});
    r.duration_ns = 10;
    r.results.push_back(Param{"r", "string", v});
    if (typed) {
      EXPECT_NO_THROW(sink->emit_entry(e));
      EXPECT_NO_THROW(sink->emit_return(r));
    } else {
      EXPECT_NO_THROW(sink->emit(to_event(e)));
      EXPECT_NO_THROW(sink->emit(to_event(r)));
    }
    EXPECT_NO_THROW(sink->emit(to_event(RunSummary{.backend = "test", .ts_ns = 30})));
    EXPECT_NO_THROW(sink->flush());
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

// A traced string holding invalid UTF-8 prints in text as Go's %q prints it, and its JSON is
// what docs/json.md promises (each invalid byte as U+00XX), in every writer, none throwing.
TEST(ValueDecoder, InvalidUtf8IsQuotedAsGoDoesAndJsonKeepsItsForm) {
  TypeGraph g = make_graph();
  FakeMemory m;
  // 0xFF, a lone 0xC3, a valid "ÿ" (0xC3 0xBF) and U+202E (a bidi override).
  const std::string s = "a\xff|\xc3|\xc3\xbf|\xe2\x80\xae";
  m.put_str(0x1000, s);
  uint64_t ptrs[2] = {0x1000, s.size()};
  ValueDecoder d(m, env_for(&g, ver(22)), DecodeLimits{});
  const json v = d.decode(kString, {reinterpret_cast<uint8_t*>(ptrs), 16});
  DecodeLimits lim;
  lim.max_str = 5;
  ValueDecoder cut(m, env_for(&g, ver(22)), lim);
  const json vcut = cut.decode(kString, {reinterpret_cast<uint8_t*>(ptrs), 16});

  // Go 1.24's fmt.Printf("%q\n", "a\xff|\xc3|\xc3\xbf|\u202e") and of its first 5 bytes:
  const std::string go_q = "\"a\\xff|\\xc3|\xc3\xbf|\\u202e\"";  // "a\xff|\xc3|ÿ|\u202e"
  const std::string go_q5 = "\"a\\xff|\\xc3|\"";                 // "a\xff|\xc3|"
  EXPECT_EQ(value_to_text(v), go_q);
  EXPECT_EQ(value_to_text(vcut), go_q5 + "...(len 11)");

  // The JSON form as before: 0xFF as U+00FF (c3 bf), the lone 0xC3 as U+00C3 (c3 83); JSON
  // Lines keep non-ASCII as UTF-8, the Perfetto file writes it as \u escapes.
  const std::string utf8 = "a\xc3\xbf|\xc3\x83|\xc3\xbf|\xe2\x80\xae";
  const std::string lines_value = "\"value\":\"" + utf8 + "\"";
  const std::string lines_cut = "\"value\":{\"len\":11,\"str\":\"a\xc3\xbf|\xc3\x83|\",";
  for (bool typed : {true, false}) {
    SCOPED_TRACE(typed ? "typed" : "generic");
    const std::string lines = written("json", v, typed);
    EXPECT_NE(lines.find(lines_value), std::string::npos) << lines;
    EXPECT_NE(written("json", vcut, typed).find(lines_cut), std::string::npos)
        << written("json", vcut, typed);
    const std::string perfetto = written("perfetto", v, typed);
    EXPECT_NE(perfetto.find(R"("s":"a\u00ff|\u00c3|\u00ff|\u202e")"), std::string::npos)
        << perfetto;
    const std::string rec = written("record", v, typed);
    EXPECT_NE(rec.find(lines_value), std::string::npos) << rec;
    // The record reads back; it holds the JSON form, so report shows the code points.
    std::istringstream in(rec);
    char* buf = nullptr;
    size_t len = 0;
    std::FILE* f = open_memstream(&buf, &len);
    {
      auto text = make_text_writer(f);
      EXPECT_TRUE(replay_record("rec", in, *text).ok());
    }
    std::fclose(f);
    const std::string shown(buf, len);
    std::free(buf);
    EXPECT_NE(shown.find("s=\"a\xc3\xbf|\xc3\x83|\xc3\xbf|\\u202e\""), std::string::npos) << shown;
  }

  // A value's names are not its bytes: they keep the names' rule (U+FFFD, cli.md).
  const json named = {{"fields", json::array({{{"name", "\xff"}, {"value", "\xff"}}})}};
  EXPECT_FALSE(value_json_is_safe(named));
  EXPECT_EQ(value_json_safe(named),
            json({{"fields", json::array({{{"name", "\xff"}, {"value", "\xc3\xbf"}}})}}));
}

TEST(ValueDecoder, InterfacesThroughTypeDescriptors) {
  for (int minor : {19, 22, 26}) {
    SCOPED_TRACE(minor);
    GoVersion v = ver(minor);
    TypeGraph g = make_graph();
    FakeMemory m;
    put_rtype(m, v, 0x100, GoKind::Int, 8, false, "int", 0x1000);
    put_rtype(m, v, 0x200, GoKind::Struct, 24, false, "main.P", 0x1010);
    put_rtype(m, v, 0x300, GoKind::Ptr, 8, true, "*main.P", 0x1020, kTypes + 0x200);
    // Struct fields of main.P: {Name, Typ, Offset} x2; names are abi.Name pointers.
    m.put_u64s(kTypes + 0x200 + 48, {0, kTypes + 0x2000, 2, 2});
    m.put_u64s(kTypes + 0x2000,
               {kTypes + 0x3000, kTypes + 0x100, 0, kTypes + 0x3010, kTypes + 0x400, 8});
    m.put_str(kTypes + 0x3000, std::string("\x01\x01X", 3));
    m.put_str(kTypes + 0x3010, std::string("\x01\x01S", 3));
    put_rtype(m, v, 0x400, GoKind::String, 16, false, "string", 0x1030);
    m.put_u64s(0x9000, {42});
    m.put_str(0xA000, "hi");
    m.put_u64s(0x9100, {-5ull, 0xA000, 2});
    ValueDecoder d(m, env_for(&g, v), DecodeLimits{});
    EXPECT_EQ(d.decode_interface(kTypes + 0x100, 0x9000, true),
              json({{"type", "int"}, {"value", 42}}));
    json pv = d.decode_interface(kTypes + 0x300, 0x9100, true);
    EXPECT_EQ(pv["type"], "*main.P");
    EXPECT_EQ(pv["value"]["elem"], json::parse(R"({"fields":[{"name":"X","value":-5},
                                                         {"name":"S","value":"hi"}]})"));
    // iface: itab {inter, type, ...}
    put_rtype(m, v, 0x500, GoKind::Interface, 16, false, "error", 0x1040);
    m.put_u64s(0xB000, {kTypes + 0x500, kTypes + 0x300, 0, 0});
    json iv = d.decode_interface(0xB000, 0x9100, false);
    EXPECT_EQ(iv["type"], "*main.P");
    EXPECT_TRUE(d.decode_interface(0, 0, true).is_null());
    // Without DWARF, a two-word argument that is an itab pair is recognised.
    auto guessed = d.guess_interface(0xB000, 0x9100);
    ASSERT_TRUE(guessed.has_value());
    EXPECT_EQ((*guessed)["type"], "*main.P");
    EXPECT_FALSE(d.guess_interface(0xA000, 2).has_value());  // a string, not an interface
    // A string whose bytes lie among the descriptors (Go 1.21 puts some there) is not one
    // either: its bytes give a field alignment of 0x49 ("I"), which no type has.
    m.put_str(kTypes + 0x600, std::string("\x00\x02rg\x00\x02wg\x00\x02rt\x00\x02wt\x00\x02wd"
                                          "\x01\x02In\x01\x02Is\x00\x02ro\x00\x02pd\x01\x02Or"
                                          "\x01\x02Lo\x01\x02Hi\x00\x02Se\x00\x02Gr\x00\x02Ch",
                                          60));
    EXPECT_FALSE(d.guess_interface(kTypes + 0x600, 1).has_value());
  }
}

// Field names are data: a struct whose fields are named like gotap's marks decodes like any
// other, in declaration order (issue 19 item 4).
TEST(ValueDecoder, StructFieldsNamedLikeMarksInDeclarationOrder) {
  TypeGraph g = make_graph();
  FakeMemory m;
  m.put_str(0x1000, std::string("r\0w", 3));
  m.put_str(0x1100, "loc");
  m.put_u64s(0x1200, {77});
  // raw []byte{0x1000, 3, 8}, addr 5, location "loc", elem &77, unreadable 1
  m.put_u64s(0x3000, {0x1000, 3, 8, 5, 0x1100, 3, 0x1200, 1});
  ValueDecoder d(m, env_for(&g, ver(22)), DecodeLimits{});
  json v = d.decode_at(kMarks, 0x3000);
  json want = json::parse(R"({"fields":[
      {"name":"raw","value":{"len":3,"cap":8,"bytes":"720077"}},
      {"name":"addr","value":5},
      {"name":"location","value":"loc"},
      {"name":"elem","value":{"addr":"0x1200","elem":77}},
      {"name":"unreadable","value":1}]})");
  EXPECT_EQ(v, want);
}

TEST(ValueDecoder, BytesAndArraysCutShortAreMarked) {
  TypeGraph g = make_graph();
  FakeMemory m;
  m.put_str(0x1000, "hello, world");
  DecodeLimits lim;
  lim.max_str = 5;
  lim.max_elems = 2;
  ValueDecoder d(m, env_for(&g, ver(22)), lim);
  uint64_t sl[3] = {0x1000, 12, 16};
  // []byte: read up to --max-str like a string, exact bytes as hex, cut marked.
  EXPECT_EQ(d.decode(kBytes, {reinterpret_cast<uint8_t*>(sl), 24}),
            json({{"len", 12}, {"cap", 16}, {"bytes", "68656c6c6f"}, {"truncated", true}}));
  // A []byte whose bytes cannot be read says so.
  uint64_t bad[3] = {0xdead0000, 3, 3};
  json u = d.decode(kBytes, {reinterpret_cast<uint8_t*>(bad), 24});
  EXPECT_EQ(u["unreadable"], true);
  EXPECT_EQ(u["len"], 3);
  // [4]byte: whole.
  uint8_t a4[4] = {0xde, 0xad, 0xbe, 0xef};
  EXPECT_EQ(d.decode(kArr4Bytes, {a4, 4}), json({{"len", 4}, {"bytes", "deadbeef"}}));
  // [4]byte beyond --max-str: cut at it and marked.
  DecodeLimits three;
  three.max_str = 3;
  ValueDecoder short_str(m, env_for(&g, ver(22)), three);
  EXPECT_EQ(short_str.decode(kArr4Bytes, {a4, 4}),
            json({{"len", 4}, {"bytes", "deadbe"}, {"truncated", true}}));
  // An array too large to read at once: only the bytes shown are read.
  m.put_str(0x40000, std::string(100000, 'z'));
  EXPECT_EQ(short_str.decode_at(kArrBigBytes, 0x40000),
            json({{"len", 100000}, {"bytes", "7a7a7a"}, {"truncated", true}}));
  // [3]int beyond --max-elems: cut and marked like a slice, not a shorter plain list.
  int64_t a3[3] = {1, 2, 3};
  EXPECT_EQ(d.decode(kArr3, {reinterpret_cast<uint8_t*>(a3), 24}),
            json({{"len", 3}, {"elems", {1, 2}}, {"truncated", true}}));
  ValueDecoder whole(m, env_for(&g, ver(22)), DecodeLimits{});
  EXPECT_EQ(whole.decode(kArr3, {reinterpret_cast<uint8_t*>(a3), 24}), json({1, 2, 3}));
}

TEST(ValueDecoder, DurationAndTimeAsGoPrintsThem) {
  TypeGraph g = make_graph();
  FakeMemory m;
  ValueDecoder d(m, env_for(&g, ver(22)), DecodeLimits{});
  int64_t ns = 300000000000;  // 5m0s, etcd's lookbackDelta
  EXPECT_EQ(d.decode(kDuration, {reinterpret_cast<uint8_t*>(&ns), 8}),
            json({{"duration", "5m0s"}, {"ns", 300000000000}}));
  // time.Date(2026, 11, 24, 19, 40, 5, 500000000, time.UTC): no monotonic reading, so wall
  // holds the nanoseconds and ext the seconds since year 1; loc nil is UTC.
  uint64_t t[3] = {500000000, 63931146005ull, 0};
  json tv = d.decode(kTime, {reinterpret_cast<uint8_t*>(t), 24});
  EXPECT_EQ(tv["time"], "2026-11-24 19:40:05.5 +0000 UTC");
  ASSERT_EQ(tv["fields"].size(), 3u);
  EXPECT_EQ(tv["fields"][0]["name"], "wall");
  EXPECT_EQ(tv["fields"][1]["value"], 63931146005ll);
  // A location that cannot be read: UTC, marked.
  uint64_t t2[3] = {0, 63931146005ull, 0xdead0000};
  json tv2 = d.decode(kTime, {reinterpret_cast<uint8_t*>(t2), 24});
  EXPECT_EQ(tv2["time"], "2026-11-24 19:40:05 +0000 UTC");
  EXPECT_EQ(tv2["time_location_unread"], true);
  // A location with a cached zone covering the instant: CET, +1h.
  m.put_str(0x5000, "CET");
  m.put_u64s(0x5100, {0x5000, 3, 3600, 0});  // zone{name, offset, isDST}
  m.put_u64s(0x6000, {0, 0, 0x5100, 1, 1, 0, 0, 0, 0, 0, 0, 1ull << 40, 0x5100});
  uint64_t t3[3] = {0, 63931146005ull, 0x6000};
  EXPECT_EQ(d.decode(kTime, {reinterpret_cast<uint8_t*>(t3), 24})["time"],
            "2026-11-24 20:40:05 +0100 CET");
}

TEST(ValueDecoder, BucketMap) {
  TypeGraph g = make_graph();
  FakeMemory m;
  GoVersion v = ver(22);
  // hmap{count 2, flags 0, B 0, ..., buckets}
  uint8_t hmap[48] = {};
  uint64_t count = 2, buckets = 0x8000;
  std::memcpy(hmap, &count, 8);
  std::memcpy(hmap + 16, &buckets, 8);
  m.put(0x7000, hmap, sizeof hmap);
  // bucket for map[string]int: tophash[8], keys 8x16, values 8x8, overflow.
  std::vector<uint8_t> b(8 + 8 * 16 + 8 * 8 + 8, 0);
  b[0] = 0x9a;
  b[3] = 0x17;
  b[5] = 1;  // emptyOne
  uint64_t k0[2] = {0xA000, 1}, k3[2] = {0xA010, 2};
  std::memcpy(&b[8 + 0 * 16], k0, 16);
  std::memcpy(&b[8 + 3 * 16], k3, 16);
  int64_t v0 = 100, v3 = -3;
  std::memcpy(&b[8 + 128 + 0 * 8], &v0, 8);
  std::memcpy(&b[8 + 128 + 3 * 8], &v3, 8);
  m.put(buckets, b.data(), b.size());
  m.put_str(0xA000, "a");
  m.put_str(0xA010, "bb");
  ValueDecoder d(m, env_for(&g, v), DecodeLimits{});
  uint64_t ptr = 0x7000;
  json got = d.decode(kMapStrInt, {reinterpret_cast<uint8_t*>(&ptr), 8});
  EXPECT_EQ(got["len"], 2);
  EXPECT_EQ(got["entries"], json::array({json::array({"a", 100}), json::array({"bb", -3})}));
}

// A map's header is the program's memory, so B may claim 2^31 buckets. The walk of one map
// stops with its budget, and the maps of one value share one: before, the loop over buckets
// went on through 2^31 empty turns (a fuzzer's timeout), and each map had a budget of its own.
// The budget is the event's bytes now (issue 35).
TEST(ValueDecoder, CorruptBucketCountsAreWalkedWithinABudget) {
  // Every address from kBuckets on reads as zeros: empty buckets without overflow.
  class EmptyBuckets : public FakeMemory {
   public:
    bool read(uint64_t addr, void* buf, size_t n) override {
      if (addr < kBuckets) return FakeMemory::read(addr, buf, n);
      ++bucket_reads;
      std::memset(buf, 0, n);
      return true;
    }
    uint64_t bucket_reads = 0;
  };
  TypeGraph g = make_graph();
  EmptyBuckets m;
  uint8_t hmap[48] = {};
  uint64_t count = 5, buckets = kBuckets;
  std::memcpy(hmap, &count, 8);
  hmap[9] = 31;  // B
  std::memcpy(hmap + 16, &buckets, 8);
  m.put(0x7000, hmap, sizeof hmap);
  std::vector<uint64_t> maps(16, 0x7000);
  ValueDecoder d(m, env_for(&g, ver(22)), DecodeLimits{});
  json got = d.decode(kArr16Maps, {reinterpret_cast<uint8_t*>(maps.data()), maps.size() * 8});
  // The first map spends the value's byte budget (DecodeLimits::max_read): the array is
  // cut after it, and says so; every map shown is marked cut.
  ASSERT_TRUE(got.is_object()) << got.dump();
  EXPECT_EQ(got["len"], 16);
  EXPECT_EQ(got["truncated"], true);
  ASSERT_GE(got["elems"].size(), 1u);
  for (const json& one : got["elems"]) {
    EXPECT_EQ(one["len"], 5);
    EXPECT_EQ(one["entries"], json::array());
    EXPECT_EQ(one["truncated"], true);
  }
  EXPECT_TRUE(d.budget_cut());
  EXPECT_LE(d.bytes_read(), DecodeLimits{}.max_read);
  // Empty buckets are read in runs, without their overflow pointers.
  EXPECT_LE(m.bucket_reads, 2u << 18);
  EXPECT_GT(m.bucket_reads, 0u);
}

TEST(ValueDecoder, SwissMap) {
  TypeGraph g = make_graph();
  FakeMemory m;
  GoVersion v = ver(24);
  // Small map: dirLen 0, dirPtr -> one group {ctrl, 8 slots of {key string, elem int}}.
  m.put_u64s(0x7000, {2, 0, 0x8000, 0, 0});
  uint64_t slot = 24;
  std::vector<uint8_t> grp(8 + 8 * slot, 0);
  uint64_t ctrl = 0x8080808080808080ull;
  ctrl &= ~(0xFFull << 8);  // slot 1 full (h2 = 0x11)
  ctrl |= 0x11ull << 8;
  ctrl &= ~(0xFFull << 48);  // slot 6 full
  ctrl |= 0x05ull << 48;
  ctrl &= ~(0xFFull << 16);  // slot 2 deleted
  ctrl |= 0xFEull << 16;
  std::memcpy(grp.data(), &ctrl, 8);
  uint64_t s1[3] = {0xA000, 1, 7}, s6[3] = {0xA010, 2, 9};
  std::memcpy(&grp[8 + 1 * slot], s1, 24);
  std::memcpy(&grp[8 + 6 * slot], s6, 24);
  m.put(0x8000, grp.data(), grp.size());
  m.put_str(0xA000, "a");
  m.put_str(0xA010, "bb");
  ValueDecoder d(m, env_for(&g, v, true), DecodeLimits{});
  uint64_t ptr = 0x7000;
  json got = d.decode(kMapStrInt, {reinterpret_cast<uint8_t*>(&ptr), 8});
  EXPECT_EQ(got["len"], 2);
  EXPECT_EQ(got["entries"], json::array({json::array({"a", 7}), json::array({"bb", 9})}));
}

// Runtime type descriptors in real binaries agree with the DWARF the compiler wrote: the
// DIE's DW_AT_go_runtime_type leads to a descriptor with the same name, kind and fields.
TEST(Rtype, DescriptorsMatchDwarfInFixtures) {
  auto fx = testing::all_fixtures("args");
  if (fx.empty()) GTEST_SKIP() << "no args fixtures built";
  int checked = 0;
  for (const auto& f : fx) {
    // Stripped: no DWARF to compare with; PIE: the file holds unrelocated descriptor pointers.
    if (f.flavour == "stripped" || f.flavour == "pie") continue;
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    const DwarfInfo* dw = (*bin)->dwarf();
    ASSERT_NE(dw, nullptr);
    const Moduledata& md = (*bin)->pclntab().moduledata();
    RtypeEnv env{(*bin)->buildinfo().version, md.types, md.etypes,
                 (*bin)->buildinfo().version.at_least(1, 24)};
    ElfMemoryReader mem((*bin)->elf(), 0);
    for (const char* name :
         {"main.Point", "main.Shape", "*main.Point", "map[string]int", "[]int"}) {
      const GoType* t = dw->types().by_name(name);
      ASSERT_NE(t, nullptr) << name;
      ASSERT_NE(t->runtime_type, 0u) << name;
      auto r = read_rtype(mem, env, md.types + t->runtime_type);
      ASSERT_TRUE(r.has_value()) << name;
      EXPECT_EQ(rtype_name(mem, env, *r), name);
      EXPECT_EQ(r->kind, t->kind) << name;
      EXPECT_EQ(r->size, t->size) << name;
      if (t->kind == GoKind::Struct) {
        ASSERT_EQ(r->fields.size(), t->fields.size());
        for (size_t i = 0; i < t->fields.size(); ++i) {
          EXPECT_EQ(r->fields[i].name, t->fields[i].name);
          EXPECT_EQ(r->fields[i].offset, t->fields[i].offset);
        }
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace gotap
