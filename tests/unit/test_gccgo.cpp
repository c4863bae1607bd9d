// gccgo executables: gccgo's mangling undone, System V locations, and `info` / `funcs` on the
// gccgo fixtures (tests/tools/build-gccgo-fixtures.sh) checked against nm and readelf.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/binary/gccgo_rtype.h"
#include "core/binary/gccgo_symbols.h"
#include "core/plan/gccgo_types.h"
#include "core/plan/sysv_abi.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

// Expected names follow GCC's go-encode rules (_0 '.', _1 '/', __ '_', _xNN, _uNNNN,
// _UNNNNNNNN) on symbols gccgo-12 wrote for packages with these paths.
TEST(GccgoDemangle, PackagePathsAndIdentifiers) {
  EXPECT_EQ(gccgo_demangle("gotap_0test_1geo.Point.Sum"), "gotap.test/geo.Point.Sum");
  EXPECT_EQ(gccgo_demangle("net_1http.Client.Do"), "net/http.Client.Do");
  EXPECT_EQ(gccgo_demangle("my_x2dpkg_0v2_1x__y.Under__score"), "my-pkg.v2/x_y.Under_score");
  EXPECT_EQ(gccgo_demangle("my_x2dpkg_0v2_1x__y.H_u00e9llo"), "my-pkg.v2/x_y.H\u00e9llo");
  EXPECT_EQ(gccgo_demangle("my_x2dpkg_0v2_1x__y.X_U0001d538"), "my-pkg.v2/x_y.X\U0001d538");
  EXPECT_EQ(gccgo_demangle("main._6256_7uint8..eq"), "main.[256]uint8..eq");
  EXPECT_EQ(gccgo_demangle("main.main"), "main.main");
  // Nested functions read as gc names them.
  EXPECT_EQ(gccgo_demangle("main.main..func1"), "main.main.func1");
  // GCC before 11: ..zNN.
  EXPECT_EQ(gccgo_demangle("net..z2fhttp.Client.Do"), "net/http.Client.Do");
  // Not an escape: left as it is.
  EXPECT_EQ(gccgo_demangle("a_zz.B"), "a_zz.B");
  EXPECT_EQ(gccgo_demangle("go..zerovalue"), "go..zerovalue");
}

TEST(GccgoDemangle, CloneSuffixesKept) {
  EXPECT_EQ(gcc_clone_suffix("main.total.constprop.0.isra.0"), ".constprop.0.isra.0");
  EXPECT_EQ(gcc_clone_suffix("main.add"), "");
  EXPECT_EQ(gcc_clone_suffix("main.f.cold"), ".cold");
  // Go functions named part and cold, and a method isra of a type part: no clones.
  EXPECT_EQ(gcc_clone_suffix("main.part"), "");
  EXPECT_EQ(gcc_clone_suffix("main.cold"), "");
  EXPECT_EQ(gcc_clone_suffix("main.part.isra"), "");
  EXPECT_EQ(gcc_clone_suffix("main.cold.cold"), ".cold");
  EXPECT_EQ(gcc_clone_suffix("main.f.part.0.cold"), ".part.0.cold");
  // The clone suffix's digits are not glue characters.
  EXPECT_EQ(gccgo_demangle("gotap_0test_1geo.Dist.constprop.0"), "gotap.test/geo.Dist.constprop.0");
}

TEST(GccgoDemangle, PointerMethods) {
  EXPECT_EQ(pointer_method_name("net_1http.Client.Do", "net/http.Client.Do"),
            "net/http.(*Client).Do");
  EXPECT_EQ(pointer_method_name("gotap_0test_1geo.Point.Scale", "gotap.test/geo.Point.Scale"),
            "gotap.test/geo.(*Point).Scale");
  EXPECT_EQ(pointer_method_name("main.add", "main.add"), "");                 // a function
  EXPECT_EQ(pointer_method_name("main.main..func1", "main.main.func1"), "");  // a closure
  EXPECT_EQ(value_method_spelling("net/http.(*Client).Do"), "net/http.Client.Do");
  EXPECT_EQ(value_method_spelling("main.add"), "main.add");
}

GccgoParam gp(const std::string& name, const std::string& type, uint64_t size,
              std::vector<EightbyteClass> ebs, uint64_t offset = 0) {
  GccgoParam p;
  p.name = name;
  p.type.name = type;
  p.type.size = size;
  p.type.memory = size > 16;
  if (!p.type.memory) p.type.eightbytes = std::move(ebs);
  p.offset = offset;
  return p;
}

constexpr auto I = EightbyteClass::Integer;
constexpr auto S = EightbyteClass::Sse;

std::vector<std::string> locs(const std::vector<ParamLoc>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) out.push_back(p.loc.describe());
  return out;
}

// Interfaces DWARF names as a type of their own (a typedef of {__methods, __object}, or of
// {__type_descriptor, __object} for an empty one): two words, decoded through libgo's
// descriptors; an empty one is marked as such (its first field _type), and the name then
// resolves to that interface, however often it is asked.
TEST(GccgoTypes, NamedInterfaces) {
  GccgoTypes t;
  const TypeId shape = t.add_interface("Shape", false), any = t.add_interface("Any", true);
  t.finish();
  const TypeGraph& g = t.graph();
  ASSERT_TRUE(shape && any);
  EXPECT_EQ(g.get(shape)->kind, GoKind::Interface);
  EXPECT_EQ(g.get(shape)->size, 16u);
  EXPECT_TRUE(g.get(shape)->fields.empty());
  ASSERT_EQ(g.get(any)->fields.size(), 1u);
  EXPECT_EQ(g.get(any)->fields[0].name, "_type");
  EXPECT_EQ(t.add("Shape"), shape);
  EXPECT_EQ(t.find("Any"), any);
  EXPECT_NE(t.add("*Shape"), 0u);
}

// Structs from the fields DWARF gives, keyed by their layout: gccgo's DWARF names strings.Reader
// and bufio.Reader both "Reader", as io.Reader, so each of the two structs keeps its own
// fields, the interface stays an interface, and a pointer to one struct is to that one.
TEST(GccgoTypes, StructsAreTheirLayouts) {
  const SysvType str{"string", 16};
  const SysvType i64{"int64", 8};
  SysvType strings_reader{"Reader", 32};
  strings_reader.fields = {{"s", 0, str}, {"i", 16, i64}, {"prevRune", 24, {"int", 8}}};
  SysvType bufio_reader{"Reader", 16};
  bufio_reader.fields = {{"buf", 0, {"int", 8}}, {"r", 8, {"int", 8}}};
  SysvType ptr{"*Reader", 8};
  ptr.pointee = {strings_reader};
  GccgoTypes t;
  const TypeId io = t.add_interface("Reader", false);
  const TypeId a = t.add(strings_reader), b = t.add(bufio_reader), p = t.add(ptr);
  t.finish();
  const TypeGraph& g = t.graph();
  ASSERT_TRUE(io && a && b && p);
  EXPECT_NE(a, b);
  EXPECT_EQ(g.get(io)->kind, GoKind::Interface);
  ASSERT_EQ(g.get(a)->kind, GoKind::Struct);
  ASSERT_EQ(g.get(a)->fields.size(), 3u);
  EXPECT_EQ(g.get(a)->fields[1].name, "i");
  EXPECT_EQ(g.get(a)->fields[1].offset, 16u);
  EXPECT_EQ(g.get(g.get(a)->fields[0].type)->kind, GoKind::String);
  ASSERT_EQ(g.get(b)->fields.size(), 2u);
  EXPECT_EQ(g.get(p)->kind, GoKind::Ptr);
  EXPECT_EQ(g.get(p)->elem, a);
  EXPECT_EQ(t.find(bufio_reader), b);
  EXPECT_EQ(t.find(SysvType{"Reader", 16}), io) << "a struct without fields is its name's type";
  EXPECT_EQ(t.add(strings_reader), a) << "asked again, the same type";
}

// mix(f float64, b bool, s string) (float64, error) as gccgo-12 compiles it: the 24-byte
// results struct is returned in memory, its address passed in rdi, so b is in rsi (sil)
// and s in rdx:rcx (disassembly of the fixture's main.mix).
// The decoder's types from DWARF's names: what shares gc's layout, and nothing for the rest
// (interfaces, maps, structs, named types: shown raw), however deep the name nests.
TEST(GccgoTypes, FromNames) {
  GccgoTypes t;
  const TypeId s = t.add("string"), b = t.add("bool"), ss = t.add("[][]string"), p = t.add("*int"),
               ps = t.add("*Point"), sp = t.add("[]*Point"), iface = t.add("interface {}"),
               m = t.add("map[string]int"), e = t.add("[]interface {}"),
               deep = t.add(std::string(64, '*') + "int");
  t.finish();
  const TypeGraph& g = t.graph();
  ASSERT_TRUE(s && b && ss && p && ps && sp);
  EXPECT_EQ(g.get(s)->kind, GoKind::String);
  EXPECT_EQ(g.get(s)->size, 16u);
  EXPECT_EQ(g.get(b)->kind, GoKind::Bool);
  EXPECT_EQ(g.get(b)->size, 1u);
  EXPECT_EQ(g.get(ss)->kind, GoKind::Slice);
  EXPECT_EQ(g.get(g.get(ss)->elem)->kind, GoKind::Slice);
  EXPECT_EQ(g.get(g.get(g.get(ss)->elem)->elem)->kind, GoKind::String);
  EXPECT_EQ(g.get(g.get(p)->elem)->kind, GoKind::Int);
  EXPECT_EQ(g.get(ps)->kind, GoKind::Ptr);
  EXPECT_EQ(g.get(ps)->elem, 0u);  // the address alone
  EXPECT_EQ(g.get(g.get(sp)->elem)->kind, GoKind::Ptr);
  // Two words whose dynamic type the decoder reads from libgo's descriptors.
  ASSERT_NE(iface, 0u);
  EXPECT_EQ(g.get(iface)->kind, GoKind::Interface);
  EXPECT_EQ(g.get(iface)->size, 16u);
  EXPECT_EQ(m, 0u);  // no decoding: its words raw
  ASSERT_NE(e, 0u);
  EXPECT_EQ(g.get(g.get(e)->elem)->kind, GoKind::Interface);
  // Nested past the bound: the outer pointers are there, what is too deep is not read.
  EXPECT_NE(deep, 0u);
  EXPECT_EQ(t.find("string"), s);
  EXPECT_EQ(t.find("never asked"), 0u);
}

TEST(GccgoSysv, ResultInMemoryShiftsIntegerArgs) {
  GccgoDwarfFunc f;
  f.params = {gp("f", "float64", 8, {S}), gp("b", "bool", 1, {I}), gp("s", "string", 16, {I, I})};
  SysvType r;
  r.size = 24;
  r.memory = true;
  f.result = r;
  f.results = {gp("", "float64", 8, {S}), gp("", "error", 16, {I, I}, 8)};
  auto a = assign_sysv(f);
  EXPECT_EQ(locs(a.args), (std::vector<std::string>{"x0", "rsi", "rdx+rcx"}));
  // At the RET, rax holds the buffer's address: each result at its offset in it.
  EXPECT_EQ(locs(a.results), (std::vector<std::string>{"[rax+0]", "[rax+8]"}));
}

TEST(GccgoSysv, AggregatesAndStack) {
  GccgoDwarfFunc f;
  // A slice (24 bytes) goes to the stack; the string after it still takes registers.
  f.params = {gp("xs", "[]int", 24, {}), gp("s", "string", 16, {I, I}),
              gp("c", "complex128", 16, {S, S}), gp("p", "*T", 8, {I}),
              gp("q", "interface", 16, {I, I}), gp("r", "int", 8, {I}),
              // no integer register left for a two-eightbyte value: all of it on the stack
              gp("t", "string", 16, {I, I})};
  SysvType r;
  r.size = 16;
  r.eightbytes = {I, I};
  f.result = r;
  f.results = {gp("sum", "int", 8, {I}, 0), gp("count", "int", 8, {I}, 8)};
  auto a = assign_sysv(f);
  EXPECT_EQ(locs(a.args), (std::vector<std::string>{"stack+8", "rdi+rsi", "x0+x1", "rdx", "rcx+r8",
                                                    "r9", "stack+32"}));
  EXPECT_EQ(locs(a.results), (std::vector<std::string>{"rax", "rdx"}));
}

TEST(GccgoSysv, MixedResultEightbytesAndSharedOnes) {
  GccgoDwarfFunc f;
  SysvType r;
  r.size = 16;
  r.eightbytes = {S, I};
  f.result = r;
  f.results = {gp("x", "float64", 8, {S}, 0), gp("n", "int", 8, {I}, 8)};
  EXPECT_EQ(locs(assign_sysv(f).results), (std::vector<std::string>{"x0", "rax"}));
  // (int32, bool): both in rax, each in its own bytes of it.
  r.size = 8;
  r.eightbytes = {I};
  f.result = r;
  f.results = {gp("a", "int32", 4, {I}, 0), gp("b", "bool", 1, {I}, 4)};
  EXPECT_EQ(locs(assign_sysv(f).results), (std::vector<std::string>{"rax", "rax[4:5]"}));
  // (float32, float32, int): both floats in xmm0's low and high halves, the int in rax.
  r.size = 16;
  r.eightbytes = {S, I};
  f.result = r;
  f.results = {gp("x", "float32", 4, {S}, 0), gp("y", "float32", 4, {S}, 4),
               gp("n", "int", 8, {I}, 8)};
  EXPECT_EQ(locs(assign_sysv(f).results), (std::vector<std::string>{"x0", "x0[4:8]", "rax"}));
}

// ---- the fixtures ----

std::string gccgo_fixture(const std::string& flavour) {
  return std::string(GOTAP_GCCGO_FIXTURES_DIR) + "/" + flavour + "/basic";
}

#define NEED_GCCGO_FIXTURES()                                         \
  if (!testing::file_exists(gccgo_fixture("default")))                \
  GTEST_SKIP() << "no gccgo fixtures in " << GOTAP_GCCGO_FIXTURES_DIR \
               << " (install gccgo-12: dev.sh's TEST_PACKAGES; the build makes them)"

nlohmann::json info_of(const std::string& path) {
  auto r = testing::run_command({testing::gotap_binary(), "info", "--json", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

std::map<std::string, nlohmann::json> funcs_of(const std::string& path,
                                               const std::vector<std::string>& patterns = {}) {
  std::vector<std::string> argv = {testing::gotap_binary(), "funcs", "--json", path};
  argv.insert(argv.end(), patterns.begin(), patterns.end());
  auto r = testing::run_command(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, nlohmann::json> out;
  for (auto& j : testing::events_in(r.out, "func")) out[j["func"]] = j;
  return out;
}

TEST(GccgoFixture, InfoSaysGccgo) {
  NEED_GCCGO_FIXTURES();
  auto d = info_of(gccgo_fixture("default"));
  EXPECT_EQ(d["compiler"], "gccgo");
  EXPECT_EQ(d["libgo"], "libgo.so.21");  // readelf -d: NEEDED libgo.so.21 (gccgo-12)
  EXPECT_EQ(d["go_version"], "go1.18");  // Debian's gccgo-12: the Go 1.18 language
  EXPECT_EQ(d["dwarf"], true);
  auto s = info_of(gccgo_fixture("static"));
  EXPECT_EQ(s["compiler"], "gccgo");
  EXPECT_EQ(s["libgo"], "static");
  auto st = info_of(gccgo_fixture("stripped"));
  EXPECT_EQ(st["compiler"], "gccgo");
  EXPECT_EQ(st["dwarf"], false);
  EXPECT_EQ(st["go_version"], "go1.18");  // from NEEDED libgo.so.21
  EXPECT_EQ(st["go_version_source"], "libgo_soname");
  EXPECT_EQ(st["stripped"], true);
}

// Debian's libgo itself: a shared library target. Checked against its own code:
// fmt.Sprintf returns its string in rax:rdx (objdump), net/http's Client.Do returns
// (*Response, error), 24 bytes, through the buffer rdi points at, so c is in rsi.
TEST(GccgoFixture, Libgo) {
  const std::string lib = "/usr/lib/x86_64-linux-gnu/libgo.so.21";
  if (!testing::file_exists(lib)) GTEST_SKIP() << "no " << lib << " (gccgo-12's libgo21)";
  auto info = info_of(lib);
  EXPECT_EQ(info["compiler"], "gccgo");
  EXPECT_EQ(info["libgo"], "self");
  // gccgo's spelling of the method matches too.
  auto funcs = funcs_of(lib, {"net/http.Client.Do", "fmt.Sprintf", "time.Time.Unix"});
  ASSERT_TRUE(funcs.count("net/http.(*Client).Do"));
  EXPECT_TRUE(funcs.count("time.Time.Unix"));  // a value receiver
  ASSERT_TRUE(funcs.count("fmt.Sprintf"));
  if (funcs["fmt.Sprintf"]["args_source"] != "dwarf") GTEST_SKIP() << "libgo without DWARF";
  auto& res = funcs["fmt.Sprintf"]["results"];
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0]["loc"], "rax+rdx");
  auto& r = funcs["net/http.(*Client).Do"]["results"];
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["name"], "~r0");
  EXPECT_EQ(r[1]["name"], "~r1");
  EXPECT_EQ(funcs["net/http.(*Client).Do"]["args"][0]["loc"], "rsi");
}

TEST(GccgoFixture, GcBinariesSayGc) {
  auto fx = testing::all_fixtures("basic");
  if (fx.empty()) GTEST_SKIP() << "no gc fixtures in " << testing::fixtures_dir();
  EXPECT_EQ(info_of(fx.back().path)["compiler"], "gc");
}

// Every global function of the program's own packages that nm lists is listed by funcs, at
// nm's address, with the Go name gccgo itself gave it in DW_AT_name (readelf's view).
TEST(GccgoFixture, FuncsEqualNmWithDwarfNames) {
  NEED_GCCGO_FIXTURES();
  for (const std::string flavour : {"default", "static"}) {
    SCOPED_TRACE(flavour);
    const std::string path = gccgo_fixture(flavour);
    auto nm = testing::run_command({"/usr/bin/nm", "--defined-only", path});
    ASSERT_EQ(nm.exit_code, 0) << nm.err;
    auto re = testing::run_command({"/usr/bin/readelf", "--debug-dump=info", path});
    ASSERT_EQ(re.exit_code, 0) << re.err;
    // DW_AT_linkage_name -> DW_AT_name, within one DIE (either order).
    std::map<std::string, std::string> go_name;
    {
      std::istringstream in(re.out);
      std::string line, linkage, name;
      std::regex attr(R"(DW_AT_(linkage_name|name)\s*:\s*(?:\(indirect[^)]*\):\s*)?(\S+)\s*$)");
      std::smatch m;
      while (std::getline(in, line)) {
        if (line.find("Abbrev Number") != std::string::npos) {
          linkage.clear();
          name.clear();
        } else if ((line.find("DW_AT_name") != std::string::npos ||
                    line.find("DW_AT_linkage_name") != std::string::npos) &&
                   std::regex_search(line, m, attr)) {
          // (The regex only where it can match: run on every line of the static build's
          // DWARF it took a minute under ASan.)
          (m[1] == "name" ? name : linkage) = m[2];
          if (!linkage.empty() && !name.empty()) go_name[linkage] = name;
        }
      }
    }
    auto funcs = funcs_of(path);
    std::map<std::string, std::string> entry_of;
    // gotap writes a pointer method as gc does, pkg.(*T).M; gccgo's DW_AT_name is pkg.T.M.
    for (auto& [n, j] : funcs)
      entry_of[std::regex_replace(n, std::regex(R"(\.\(\*([^)]+)\)\.)"), ".$1.")] = j["entry"];
    std::istringstream in(nm.out);
    std::string addr, kind, sym;
    size_t checked = 0;
    while (in >> addr >> kind >> sym) {
      if (kind != "T") continue;
      if (sym.rfind("main.", 0) != 0 && sym.rfind("gotap_0test_1geo.", 0) != 0) continue;
      SCOPED_TRACE(sym);
      const uint64_t at = std::stoull(addr, nullptr, 16);
      auto it = go_name.find(sym);
      if (it == go_name.end() && sym.find("..") != std::string::npos) {
        // gccgo's type hash and equality helpers (PKG.TYPE..eq) carry their mangled name in
        // DWARF too, so there is no Go spelling to compare with: the address is listed,
        // under a name of the same package and kind.
        bool found = false;
        for (auto& [n, e] : entry_of)
          if (std::stoull(e.substr(2), nullptr, 16) == at) {
            found = true;
            EXPECT_EQ(n.rfind("main.", 0), 0u) << n;
            EXPECT_EQ(n.substr(n.rfind("..")), sym.substr(sym.rfind(".."))) << n;
          }
        EXPECT_TRUE(found) << "nothing listed at " << addr;
        ++checked;
        continue;
      }
      // main's functions have no linkage name: their symbol is already the Go name.
      std::string want = it != go_name.end() ? it->second : sym;
      if (sym.rfind("gotap_0test_1geo.", 0) == 0) {
        ASSERT_NE(it, go_name.end()) << sym << " has no DW_AT_linkage_name";
      }
      ASSERT_TRUE(entry_of.count(want)) << want << " not listed by funcs";
      EXPECT_EQ(std::stoull(entry_of[want].substr(2), nullptr, 16), at);
      ++checked;
    }
    // main.Add3, main.main, the three geo functions, and gccgo's ..eq helpers.
    EXPECT_GE(checked, 5u);
    EXPECT_TRUE(entry_of.count("gotap.test/geo.Point.Scale"));
    EXPECT_TRUE(entry_of.count("gotap.test/geo.Dist"));
    // The receivers the fixture's source declares: Scale's a pointer, Sum's a value.
    EXPECT_TRUE(funcs.count("gotap.test/geo.(*Point).Scale"));
    EXPECT_TRUE(funcs.count("gotap.test/geo.Point.Sum"));
  }
}

// Parameters as the fixture's source declares them, placed by the System V ABI; each RET
// site is a RET in objdump's disassembly of the function.
TEST(GccgoFixture, ParamsFromDwarfBySysv) {
  NEED_GCCGO_FIXTURES();
  const std::string path = gccgo_fixture("default");
  auto funcs = funcs_of(path, {"main.Add3", "gotap.test/geo.*", "main.add"});
  auto sig = [&](const std::string& f, const char* key) {
    std::vector<std::string> out;
    for (auto& p : funcs.at(f)[key])
      out.push_back(p["name"].get<std::string>() + " " + p["type"].get<std::string>() + " @" +
                    p["loc"].get<std::string>());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(sig("main.Add3", "args"), (V{"a int @rdi", "b int @rsi", "c int @rdx"}));
  EXPECT_EQ(sig("main.Add3", "results"), (V{"~r0 int @rax"}));
  EXPECT_EQ(sig("gotap.test/geo.Dist", "args"), (V{"a float64 @x0", "b float64 @x1"}));
  EXPECT_EQ(sig("gotap.test/geo.Dist", "results"), (V{"~r0 float64 @x0"}));
  EXPECT_EQ(sig("gotap.test/geo.(*Point).Scale", "args"), (V{"p *Point @rdi", "k int @rsi"}));
  // A value method takes its receiver by pointer (objdump: a nil check of rdi, then loads
  // through it), under the name "pointer".
  EXPECT_EQ(sig("gotap.test/geo.Point.Sum", "args"), (V{"pointer *Point @rdi"}));
  EXPECT_EQ(sig("main.add", "args"), (V{"a int @rdi", "b int @rsi"}));

  auto dis = testing::run_command({"/usr/bin/objdump", "-d", "--no-show-raw-insn", path});
  ASSERT_EQ(dis.exit_code, 0) << dis.err;
  std::set<uint64_t> rets;
  std::istringstream in(dis.out);
  std::string line;
  std::regex ret(R"(^\s*([0-9a-f]+):\s+ret\b)");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, ret)) rets.insert(std::stoull(m[1], nullptr, 16));
  for (auto& [name, f] : funcs) {
    SCOPED_TRACE(name);
    ASSERT_FALSE(f["ret_sites"].empty());
    for (auto& r : f["ret_sites"])
      EXPECT_TRUE(rets.count(std::stoull(r.get<std::string>().substr(2), nullptr, 16)));
    // The split-stack path's RET (after CALL __morestack) is no return of its own.
    EXPECT_EQ(f["ret_sites"].size(), 1u);
  }
}

// GCC's own DWARF location of each parameter at the function's entry, where it is one or
// more whole registers ("rdi", "rdi+rsi", "x0"); "" otherwise (a stack slot, an entry
// value, a part of a register). Read with libdw alone, none of gotap's code.
std::string dwarf_entry_location(Dwarf_Die* param, Dwarf_Addr pc) {
  static const char* const kRegs[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
                                      "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
  Dwarf_Attribute a;
  if (!dwarf_attr(param, DW_AT_location, &a)) return "";
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_getlocation_addr(&a, pc, &ops, &n, 1) != 1 || n == 0) return "";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    uint8_t op = ops[i].atom;
    std::string reg;
    if (op >= DW_OP_reg0 && op <= DW_OP_reg15)
      reg = kRegs[op - DW_OP_reg0];
    else if (op >= DW_OP_reg17 && op <= DW_OP_reg24)
      reg = "x" + std::to_string(op - DW_OP_reg17);
    else if (op == DW_OP_regx && ops[i].number >= 17 && ops[i].number <= 24)
      reg = "x" + std::to_string(ops[i].number - 17);
    else if (op == DW_OP_piece)
      continue;
    else if (op == DW_OP_fbreg && n == 1)
      // The frame base is the CFA (DW_OP_call_frame_cfa in gccgo's DWARF): entry RSP + 8.
      // Below it is the callee's own frame, GCC's view after the prologue (a [4]byte that
      // arrived in rcx, stored at CFA-36 in syscall.SetsockoptInet4Addr): not compared.
      return int64_t(ops[i].number) < 0 ? ""
                                        : "stack+" + std::to_string(8 + int64_t(ops[i].number));
    else
      return "";
    if (i + 1 < n && ops[i + 1].atom == DW_OP_piece && ops[i + 1].number != 8 && i + 2 < n)
      return "";  // a piece smaller than a register, with more after it
    out += (out.empty() ? "" : "+") + reg;
  }
  return out;
}

// Over every Go function of the static fixture (the program and all of libgo): each
// parameter that GCC's DWARF places in whole registers at the function's entry is where
// gotap's System V assignment puts it.
TEST(GccgoFixture, SysvLocationsEqualGccsDwarf) {
  NEED_GCCGO_FIXTURES();
  const std::string path = gccgo_fixture("static");
  std::map<uint64_t, std::map<std::string, std::string>> truth;  // entry -> param -> loc
  {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    Dwarf* dw = dwarf_begin(fd, DWARF_C_READ);
    ASSERT_NE(dw, nullptr);
    Dwarf_Off off = 0, next = 0;
    size_t hsize = 0;
    while (dwarf_nextcu(dw, off, &next, &hsize, nullptr, nullptr, nullptr) == 0) {
      Dwarf_Die cu, c;
      if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &c) == 0) {
        Dwarf_Attribute pa;
        const char* prod = dwarf_attr(&cu, DW_AT_producer, &pa) ? dwarf_formstring(&pa) : "";
        if (prod && std::string(prod).rfind("GNU Go", 0) == 0) {
          do {
            Dwarf_Addr low = 0;
            if (dwarf_tag(&c) != DW_TAG_subprogram || dwarf_lowpc(&c, &low) != 0) continue;
            Dwarf_Die p;
            if (dwarf_child(&c, &p) != 0) continue;
            do {
              if (dwarf_tag(&p) != DW_TAG_formal_parameter) continue;
              const char* name = dwarf_diename(&p);
              std::string loc = dwarf_entry_location(&p, low);
              if (name && !loc.empty()) truth[low][name] = loc;
            } while (dwarf_siblingof(&p, &p) == 0);
          } while (dwarf_siblingof(&c, &c) == 0);
        }
      }
      off = next;
    }
    dwarf_end(dw);
    ::close(fd);
  }
  ASSERT_GT(truth.size(), 1000u);
  auto funcs = funcs_of(path);
  size_t compared = 0, two_regs = 0, floats = 0, callee_saved = 0, stack = 0;
  for (auto& [name, f] : funcs) {
    if (f["args_source"] != "dwarf") continue;
    auto it = truth.find(std::stoull(f["entry"].get<std::string>().substr(2), nullptr, 16));
    if (it == truth.end()) continue;
    for (auto& a : f["args"]) {
      auto t = it->second.find(a["name"].get<std::string>());
      if (t == it->second.end()) continue;
      // System V never passes an argument in a callee-saved register: GCC's location list
      // naming one at the entry is its view after the prologue's moves (reflect's
      // Value.FieldByName: objdump shows name arriving in rdx:rcx and moved to r12:r13).
      if (std::regex_search(t->second, std::regex(R"(\b(rbx|rbp|r12|r13|r14|r15)\b)"))) {
        ++callee_saved;
        continue;
      }
      EXPECT_EQ(a["loc"].get<std::string>(), t->second) << name << " " << a["name"];
      ++compared;
      two_regs += t->second.find('+') != std::string::npos;
      floats += t->second[0] == 'x';
      stack += t->second.rfind("stack", 0) == 0;
    }
  }
  // Thousands of parameters, strings and interfaces in two registers and floats among them.
  EXPECT_GT(compared, 5000u);
  EXPECT_GT(two_regs, 500u);
  EXPECT_GT(floats, 20u);
  EXPECT_GT(stack, 100u);
  EXPECT_LT(callee_saved * 100, compared);
  std::cerr << "compared " << compared << " (" << two_regs << " in two registers, " << floats
            << " floats, " << stack << " on the stack), " << callee_saved
            << " left out (callee-saved in GCC's DWARF)\n";
}

TEST(GccgoFixture, StrippedListsDynsymNamesOnly) {
  NEED_GCCGO_FIXTURES();
  auto funcs = funcs_of(gccgo_fixture("stripped"));
  ASSERT_TRUE(funcs.count("main.main"));  // exported to libgo, so in .dynsym
  EXPECT_EQ(funcs["main.main"]["args_source"], "none");
}

// Tracing works (test_runtime_gccgo.cpp); --why, which would walk libgo's stacks, is refused
// before it runs.
TEST(GccgoFixture, WhyRefusedClearly) {
  NEED_GCCGO_FIXTURES();
  const std::string path = gccgo_fixture("default");
  auto r =
      testing::run_command({testing::gotap_binary(), "trace", "--why", "main.main", "--", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "gotap: --why is not supported for gccgo programs yet (libgo's stacks are not walked)\n");
}

// A gccgo binary cut short, or with its symbol table overwritten: one clear line, exit 2 or
// a listing of what could be read, never a crash.
TEST(GccgoFixture, TruncatedAndCorrupt) {
  NEED_GCCGO_FIXTURES();
  const std::string data = testing::read_file(gccgo_fixture("default"));
  const std::string dir = ::testing::TempDir();
  for (size_t cut : {size_t(64), size_t(4096), data.size() / 2, data.size() - 100}) {
    SCOPED_TRACE(cut);
    const std::string p = dir + "/gccgo-cut";
    std::ofstream(p, std::ios::binary).write(data.data(), std::streamsize(cut));
    for (const char* cmd : {"info", "funcs"}) {
      auto r = testing::run_command({testing::gotap_binary(), cmd, p});
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << r.exit_code << r.err;
      if (r.exit_code == 2) {
        EXPECT_EQ(r.err.rfind("gotap: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      }
    }
  }
}

// libgo's descriptor strings as gccgo 12 wrote them, and what reflect's String printed for
// the same types in that program (a named type of main, a type local to a function, libgo's).
TEST(GccgoRtype, NamesAreReflectsSpelling) {
  EXPECT_EQ(gccgo_type_string("\tmain\tmain.S"), "main.S");
  EXPECT_EQ(gccgo_type_string("\tmain\tmain.\tmain$\tlocal"), "main.local");
  EXPECT_EQ(gccgo_type_string("*strconv.NumError"), "*strconv.NumError");
  EXPECT_EQ(gccgo_type_string("map[string]int"), "map[string]int");
}

}  // namespace
}  // namespace gotap
