// ABIInternal assignment checked against the compiler's own DWARF entry locations, and the
// ArgInfo-based locations of stripped binaries checked against their unstripped twins.
#include <gtest/gtest.h>

#include <cctype>
#include <map>

#include "core/binary/dwarf_info.h"
#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "core/plan/abi.h"
#include "core/plan/disasm.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using testing::Fixture;

// ---- Hand-built type graphs: the examples of abi-internal.md ----

struct GraphBuilder {
  TypeGraph g;
  TypeId next = 1;
  TypeId basic(GoKind k, uint64_t size, const char* name) {
    GoType t;
    t.id = next++;
    t.kind = k;
    t.size = size;
    t.name = name;
    g.add(t);
    return t.id;
  }
  TypeId array(TypeId elem, int64_t n, uint64_t elem_size) {
    GoType t;
    t.id = next++;
    t.kind = GoKind::Array;
    t.elem = elem;
    t.count = n;
    t.size = elem_size * n;
    g.add(t);
    return t.id;
  }
  TypeId strukt(std::vector<std::pair<TypeId, uint64_t>> fields, uint64_t size) {
    GoType t;
    t.id = next++;
    t.kind = GoKind::Struct;
    t.size = size;
    for (auto& [ty, off] : fields) t.fields.push_back(GoField{"f", ty, off, false});
    g.add(t);
    return t.id;
  }
};

TEST(Abi, DescribeFollowsTheContract) {
  ValueLoc two;
  two.pieces.push_back(LocPiece{LocPiece::IntReg, 1, 0, 0, 8});
  two.pieces.push_back(LocPiece{LocPiece::IntReg, 2, 0, 8, 8});
  EXPECT_EQ(two.describe(), "rbx+rcx");
  EXPECT_TRUE(two.in_registers());
  ValueLoc st;
  st.pieces.push_back(LocPiece{LocPiece::Stack, 0, 8, 0, 16});
  EXPECT_EQ(st.describe(), "stack+8");
  EXPECT_FALSE(st.in_registers());
  ValueLoc fl;
  fl.pieces.push_back(LocPiece{LocPiece::FloatReg, 0, 0, 0, 8});
  EXPECT_EQ(fl.describe(), "x0");
  EXPECT_EQ(ValueLoc{}.describe(), "");
}

// The example of src/cmd/compile/abi-internal.md:
// func f(a1 uint8, a2 [2]uintptr, a3 uint8) (r1 struct { x uintptr; y [2]uintptr }, r2 string)
TEST(Abi, SpecExample) {
  GraphBuilder b;
  TypeId u8 = b.basic(GoKind::Uint8, 1, "uint8");
  TypeId up = b.basic(GoKind::Uintptr, 8, "uintptr");
  TypeId str = b.basic(GoKind::String, 16, "string");
  TypeId a2 = b.array(up, 2, 8);
  TypeId r1 = b.strukt({{up, 0}, {a2, 8}}, 24);
  b.g.index();
  auto locs = assign_abi_internal(b.g, {{"a1", u8, false},
                                        {"a2", a2, false},
                                        {"a3", u8, false},
                                        {"r1", r1, true},
                                        {"r2", str, true}});
  ASSERT_EQ(locs.size(), 5u);
  EXPECT_EQ(locs[0].loc.describe(), "rax");
  EXPECT_EQ(locs[1].loc.describe(), "stack+8");  // frame offset 0
  EXPECT_EQ(locs[2].loc.describe(), "rbx");
  EXPECT_EQ(locs[3].loc.describe(), "stack+24");  // after a2, pointer aligned
  EXPECT_EQ(locs[4].loc.describe(), "rax+rbx");   // results restart at the first register
  auto abi0 = assign_abi0(b.g, {{"a1", u8, false},
                                {"a2", a2, false},
                                {"a3", u8, false},
                                {"r1", r1, true},
                                {"r2", str, true}});
  EXPECT_EQ(abi0[0].loc.describe(), "stack+8");
  EXPECT_EQ(abi0[1].loc.describe(), "stack+16");
  EXPECT_EQ(abi0[2].loc.describe(), "stack+32");
  EXPECT_EQ(abi0[3].loc.describe(), "stack+40");
  EXPECT_EQ(abi0[4].loc.describe(), "stack+64");
}

TEST(Abi, ShapeFunctionNames) {
  EXPECT_TRUE(is_shape_function("main.Sum[go.shape.int]"));
  EXPECT_TRUE(is_shape_function("main.Box[go.shape.string_0].Get"));
  EXPECT_FALSE(is_shape_function("main.Sum"));
  using D = AbiOptions::Dict;
  EXPECT_EQ(dict_position("main.Sum[go.shape.int]", 26), D::First);
  EXPECT_EQ(dict_position("main.Box[go.shape.int].Get", 26), D::AfterReceiver);
  EXPECT_EQ(dict_position("main.(*Box[go.shape.int]).Set", 21), D::AfterReceiver);
  EXPECT_EQ(dict_position("main.Box[go.shape.int_0].Get", 19), D::First);
  EXPECT_EQ(dict_position("main.F[go.shape.int].func1", 26), D::None);
  EXPECT_EQ(dict_position("main.F[go.shape.[]int].func2.1", 26), D::None);
  EXPECT_EQ(dict_position("type:.eq.main.P[go.shape.int]", 26), D::None);
  EXPECT_EQ(dict_position("main.Sum", 26), D::None);
}

// ---- Fixtures ----

std::vector<Fixture> fixtures_with(const std::string& flavour_not) {
  std::vector<Fixture> out;
  for (auto& f : testing::all_fixtures("signatures"))
    if (f.flavour != flavour_not) out.push_back(f);
  return out;
}

// DWARF register number -> ABIInternal location piece (nullopt for registers that never
// carry arguments, such as RDX, the closure context).
std::optional<LocPiece> from_dwarf_reg(int r) {
  static const std::map<int, int> kInt = {{0, 0}, {3, 1}, {2, 2},  {5, 3}, {4, 4},
                                          {8, 5}, {9, 6}, {10, 7}, {11, 8}};
  LocPiece p;
  if (auto it = kInt.find(r); it != kInt.end()) {
    p.kind = LocPiece::IntReg;
    p.reg = static_cast<uint8_t>(it->second);
    return p;
  }
  if (r >= 17 && r <= 32) {
    p.kind = LocPiece::FloatReg;
    p.reg = static_cast<uint8_t>(r - 17);
    return p;
  }
  return std::nullopt;
}

std::string piece_str(const LocPiece& p) {
  ValueLoc v;
  v.pieces.push_back(p);
  return v.describe();
}

// The DWARF location of one value turned into (value offset -> location) pairs. DWARF
// pieces of Go values follow the register order, so offsets accumulate piece sizes; a
// piece with no location (optimized out) still takes its bytes.
struct DwarfWord {
  uint64_t value_offset;
  std::optional<LocPiece> loc;  // nullopt: optimized out or not an argument register
  bool is_stack = false;
  int64_t stack_offset = 0;  // entry-RSP relative, when is_stack
};

std::vector<DwarfWord> dwarf_words(const std::vector<DwarfLocPiece>& pieces) {
  std::vector<DwarfWord> out;
  uint64_t off = 0;
  for (const auto& p : pieces) {
    DwarfWord w{off, std::nullopt};
    if (p.kind == DwarfLocPiece::Reg) {
      w.loc = from_dwarf_reg(p.dwarf_reg);
      if (!w.loc) w.loc = LocPiece{LocPiece::IntReg, 255, 0, 0, 0};  // a wrong register
    } else if (p.kind == DwarfLocPiece::FrameBase) {
      w.is_stack = true;
      w.stack_offset = p.fb_offset + 8;  // CFA = entry RSP + 8
    }
    out.push_back(w);
    off += p.size;
  }
  return out;
}

struct Compare {
  int params = 0;  // params whose DWARF location covered the entry and was compared
  int words = 0;
  std::vector<std::string> mismatches;
  // Disagreements where the ArgInfo of the binary sides with our assignment: DWARF bugs.
  std::vector<std::string> dwarf_wrong;
};

// The piece of `loc` holding byte `off` of the value.
const LocPiece* piece_at(const ValueLoc& loc, uint64_t off) {
  for (const auto& p : loc.pieces)
    if (p.kind != LocPiece::Stack && p.value_offset <= off && off < p.value_offset + p.size)
      return &p;
  return nullptr;
}

// Compares the ABI assignment of one value with its DWARF entry location: each register
// piece of DWARF must be the register ours puts that byte of the value in, and a stack piece
// must be at the same offset. Returns whether anything was compared; appends mismatches.
bool compare_value(const ParamLoc& ours, const std::vector<DwarfLocPiece>& dw, Compare& c,
                   const std::string& what, std::vector<std::string>& bad) {
  auto words = dwarf_words(dw);
  // DWARF pieces carry no value offsets. Go emits one per register-sized part in order, plus
  // empty pieces: for a part that is optimized out (same size as the part), or for padding
  // between fields (`-N -l` builds; always smaller than the next part).
  bool compared = false;
  size_t k = 0;  // our next piece
  for (size_t wi = 0; wi < words.size(); ++wi) {
    const auto& w = words[wi];
    const auto& piece = dw[wi];
    if (w.is_stack) {
      compared = true;
      ++c.words;
      if (ours.loc.pieces.size() != 1 || ours.loc.pieces[0].kind != LocPiece::Stack ||
          ours.loc.pieces[0].stack_offset + static_cast<int64_t>(w.value_offset) !=
              w.stack_offset) {
        bad.push_back(fmt::format("{}: DWARF stack+{} at value offset {}, ours {}", what,
                                  w.stack_offset, w.value_offset, ours.loc.describe()));
        return true;
      }
      continue;
    }
    if (!w.loc) {
      if (piece.kind == DwarfLocPiece::Other && k < ours.loc.pieces.size() &&
          piece.size == ours.loc.pieces[k].size)
        ++k;
      continue;
    }
    compared = true;
    ++c.words;
    const LocPiece* p = k < ours.loc.pieces.size() ? &ours.loc.pieces[k] : nullptr;
    ++k;
    if (!p || p->kind != w.loc->kind || p->reg != w.loc->reg) {
      bad.push_back(fmt::format("{}: DWARF piece {} is {}, ours {}", what, wi,
                                w.loc->reg == 255 ? "a non-argument register" : piece_str(*w.loc),
                                ours.loc.describe()));
      return true;
    }
  }
  return compared;
}

int go_minor(const std::string& version) {  // "1.21" -> 21
  auto dot = version.find('.');
  return dot == std::string::npos ? 0 : std::atoi(version.c_str() + dot + 1);
}

// A pointer-shaped type of the graph, to stand for the hidden dictionary.
TypeId pointer_type(const TypeGraph& g) {
  for (const char* n : {"*uint8", "unsafe.Pointer", "uintptr"})
    if (const GoType* t = g.by_name(n)) return t->id;
  return 0;
}

// The inputs of ABIInternal in ABI order, with the hidden dictionary made explicit (named
// ".dict") where DWARF leaves it out, so it takes its register like any pointer.
std::vector<AbiParamIn> abi_inputs(const DwarfFunc& f, const TypeGraph& g, int minor) {
  std::vector<AbiParamIn> in;
  for (const auto& p : f.params) in.push_back({p.name, p.type, p.is_result});
  bool listed = std::any_of(in.begin(), in.end(), [](auto& p) { return p.name == ".dict"; });
  auto pos = dict_position(f.name, minor);
  if (listed || pos == AbiOptions::Dict::None) return in;
  size_t at = 0;
  if (pos == AbiOptions::Dict::AfterReceiver && !in.empty() && !in[0].is_result) at = 1;
  in.insert(in.begin() + at, AbiParamIn{".dict", pointer_type(g), false});
  return in;
}

// When DWARF and our assignment disagree about an argument, the compiler's other record of
// argument positions decides: the ArgInfo of the same binary, read through the morestack
// spills. Returns true when it confirms ours.
struct Tiebreak {
  const ElfFile* elf;
  const Pclntab* pcln;
  bool confirms(const std::string& func, size_t arg_index, const ParamLoc& ours) const {
    if (!pcln) return false;
    auto fs = pcln->lookup(func);
    if (fs.empty()) return false;
    auto items = pcln->arg_info(*fs[0]);
    if (!items) return false;
    FuncCode fc =
        analyze_function(elf->read(fs[0]->entry, fs[0]->end - fs[0]->entry), fs[0]->entry);
    if (fc.morestack_spills.empty() && !ours.loc.pieces.empty() &&
        ours.loc.pieces[0].kind != LocPiece::Stack)
      return false;  // registers cannot be confirmed without spills
    auto got = args_from_arginfo(*items, fc.morestack_spills, true);
    if (arg_index >= got.size()) return false;
    const auto& g = got[arg_index].loc.pieces;
    if (g.empty() || g.size() < ours.loc.pieces.size()) return false;
    if (ours.loc.pieces.size() == 1 && ours.loc.pieces[0].kind == LocPiece::Stack)
      return g[0].kind == LocPiece::Stack && g[0].stack_offset == ours.loc.pieces[0].stack_offset;
    for (const auto& piece : g) {
      const LocPiece* o = piece_at(ours.loc, piece.value_offset);
      if (!o || o->kind != piece.kind || o->reg != piece.reg) return false;
    }
    return true;
  }
};

Compare compare_binary(const DwarfInfo& dw, const std::vector<std::string>& names, int minor,
                       const Tiebreak& tb, int* funcs_out) {
  Compare c;
  int funcs = 0;
  for (const auto& name : names) {
    const DwarfFunc* f = dw.func(name);
    if (!f || f->params.empty()) continue;
    ++funcs;
    auto in = abi_inputs(*f, dw.types(), minor);
    auto locs = assign_abi_internal(dw.types(), in);
    // The ArgInfo skips the first input of functions with "[" in the name (the dictionary,
    // as the compiler assumes).
    size_t arg_base = name.find('[') != std::string::npos ? 1 : 0;
    size_t arg_index = 0;
    for (size_t i = 0, k = 0; i < in.size(); ++i) {
      bool synthetic =
          in[i].name == ".dict" && (k >= f->params.size() || f->params[k].name != ".dict");
      size_t this_arg = in[i].is_result ? SIZE_MAX : arg_index++;
      if (synthetic) continue;
      const auto& p = f->params[k++];
      if (!p.entry_loc) continue;
      // A result's entry location is meaningful only for stack results (their frame slot);
      // register results live in locals of the callee until the RET.
      if (p.is_result) {
        bool stack_slot = !p.entry_loc->empty() &&
                          (*p.entry_loc)[0].kind == DwarfLocPiece::FrameBase &&
                          (*p.entry_loc)[0].fb_offset >= 0;
        if (!stack_slot || locs[i].loc.in_registers()) continue;
      }
      std::vector<std::string> bad;
      if (!compare_value(locs[i], *p.entry_loc, c, name + " " + p.name, bad)) continue;
      ++c.params;
      if (bad.empty()) continue;
      if (!p.is_result && this_arg >= arg_base && tb.confirms(name, this_arg - arg_base, locs[i])) {
        c.dwarf_wrong.push_back(bad[0]);
      } else {
        c.mismatches.push_back(bad[0]);
      }
    }
  }
  if (funcs_out) *funcs_out = funcs;
  return c;
}

std::vector<std::string> all_func_names(const ElfFile& elf, const DwarfInfo& dw) {
  std::vector<std::string> names;
  for (const auto& s : elf.symbols())
    if (s.type == 2 /* STT_FUNC */ && dw.func(s.name)) names.push_back(s.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

// ArgInfo encodes a word's offset in one byte; past 0xfa it only says "offset too large".
// etcd's processInternalRaftRequestOnce(ctx, r) has a large stack argument first in the
// frame, so its context's second word is such a word: the plan showed one word as the whole
// interface. A word after a known 8-byte word of the same argument is 8 bytes further, and
// the morestack path's spill of that slot names its register.
TEST(ArgInfo, WordPastTheEncodableOffsetsComesFromItsSpill) {
  using K = ArgInfoItem::Kind;
  auto word = [](uint8_t off, uint8_t size) { return ArgInfoItem{K::Word, off, size}; };
  const std::vector<ArgInfoItem> items = {
      word(0xe8, 8),  // the receiver, in rax
      ArgInfoItem{K::StartAgg, 0, 0},
      word(0xf0, 8),
      ArgInfoItem{K::OffsetTooLarge, 0, 0},
      ArgInfoItem{K::EndAgg, 0, 0},  // the interface, in rbx and rcx
      word(0, 8),                    // a stack argument first in the frame
  };
  auto spill = [](uint8_t reg, int64_t off) {
    LocPiece p;
    p.kind = LocPiece::IntReg;
    p.reg = reg;
    p.size = 8;
    return RegSpill{p, off};
  };
  // rax, rbx, rcx spilled at 8 + 0xe8, 8 + 0xf0, 8 + 0xf8 (offsets from the entry RSP).
  std::vector<RegSpill> spills = {spill(0, 8 + 0xe8), spill(1, 8 + 0xf0), spill(2, 8 + 0xf8)};
  auto got = args_from_arginfo(items, spills, true);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].size, 16u);
  ASSERT_EQ(got[1].loc.pieces.size(), 2u);
  EXPECT_EQ(got[1].loc.pieces[0].reg, 1);
  EXPECT_EQ(got[1].loc.pieces[1].reg, 2);
  EXPECT_EQ(got[1].loc.pieces[1].value_offset, 8u);
  EXPECT_EQ(got[1].loc.pieces[1].size, 8u);

  // Without the spill the second word stays unknown, and the value is not shown as one word.
  spills.pop_back();
  got = args_from_arginfo(items, spills, true);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].size, 16u);
  EXPECT_EQ(got[1].loc.pieces.size(), 1u);
}

TEST(AbiVsDwarf, EntryLocationsAgree) {
  auto fixtures = fixtures_with("stripped");
  if (fixtures.empty()) GTEST_SKIP() << "no signatures fixtures under " << testing::fixtures_dir();
  int checked = 0;
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok()) << elf.error().what();
    auto dw = DwarfInfo::load(**elf);
    ASSERT_TRUE(dw.ok()) << dw.error().what();
    if (!*dw) continue;  // built without DWARF
    const DwarfInfo& d = **dw;
    ASSERT_NE(d.producer().find("regabi"), std::string::npos) << d.producer();

    auto pcln = Pclntab::load(**elf);
    Tiebreak tb{elf->get(), pcln.ok() ? &*pcln : nullptr};
    int minor = go_minor(fx.go_version);

    std::vector<std::string> main_names;
    for (const auto& n : all_func_names(**elf, d))
      if (n.rfind("main.", 0) == 0) main_names.push_back(n);
    int main_funcs = 0;
    Compare mc = compare_binary(d, main_names, minor, tb, &main_funcs);
    for (const auto& m : mc.mismatches) ADD_FAILURE() << m;
    // Every function of the whole binary, runtime included: a broader sample of signatures.
    int all_funcs = 0;
    Compare ac = compare_binary(d, all_func_names(**elf, d), minor, tb, &all_funcs);
    printf(
        "[ stats    ] %s: main.*: %d funcs, %d params (%d words) compared, %zu mismatches, "
        "%zu DWARF errors; whole binary: %d funcs, %d params (%d words), %zu mismatches, "
        "%zu DWARF errors\n",
        fx.label().c_str(), main_funcs, mc.params, mc.words, mc.mismatches.size(),
        mc.dwarf_wrong.size(), all_funcs, ac.params, ac.words, ac.mismatches.size(),
        ac.dwarf_wrong.size());
    for (const auto& m : ac.mismatches) printf("             mismatch: %s\n", m.c_str());
    for (const auto& m : ac.dwarf_wrong)
      printf("             DWARF wrong (ArgInfo agrees with the ABI): %s\n", m.c_str());
    // The fixture has ~45 functions with ~150 parameters; most must have entry locations.
    EXPECT_GE(mc.params, 60);
    EXPECT_GE(ac.params, 500);
    // Outside main.*, a tiny residue is tolerated (and printed) for runtime oddities.
    EXPECT_LE(ac.mismatches.size() * 200, static_cast<size_t>(ac.params));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no signatures fixture with DWARF";
}

// ---- Stripped binaries: ArgInfo + morestack spills vs the unstripped twin's DWARF ----

TEST(ArgInfo, StrippedAgreesWithUnstrippedTwin) {
  auto all = testing::all_fixtures("signatures");
  std::map<std::string, std::string> twin;  // version -> unstripped default build
  for (const auto& f : all)
    if (f.flavour == "default") twin[f.go_version] = f.path;
  int checked = 0;
  for (const auto& fx : all) {
    if (fx.flavour != "stripped" || !twin.count(fx.go_version)) continue;
    SCOPED_TRACE(fx.label());
    auto selfp = ElfFile::open(fx.path);
    auto tw = ElfFile::open(twin[fx.go_version]);
    ASSERT_TRUE(selfp.ok() && tw.ok());
    auto dw = DwarfInfo::load(**tw);
    ASSERT_TRUE(dw.ok() && *dw);
    auto nodw = DwarfInfo::load(**selfp);
    ASSERT_TRUE(nodw.ok());
    EXPECT_EQ(*nodw, nullptr) << "a -w build has no DWARF";
    auto pcln = Pclntab::load(**selfp);
    ASSERT_TRUE(pcln.ok()) << pcln.error().what();

    // Words of functions with morestack spills must agree exactly; those of frameless
    // leaves (no spills) are a best-effort guess, only counted.
    int params = 0, reg_words = 0, stack_words = 0, with_spills = 0, without_spills = 0;
    int guessed_words = 0, guessed_right = 0, dwarf_words_checked = 0;
    std::vector<std::string> mismatches, dwarf_disagrees;
    for (const auto& name : all_func_names(**tw, **dw)) {
      const DwarfFunc* df = (*dw)->func(name);
      if (df->params.empty()) continue;
      auto fs = pcln->lookup(name);
      if (fs.empty()) continue;
      const PclnFunc& pf = *fs[0];
      auto items = pcln->arg_info(pf);
      if (!items) continue;
      auto code = (*selfp)->read(pf.entry, pf.end - pf.entry);
      FuncCode fc = analyze_function(code, pf.entry);
      bool exact = !fc.morestack_spills.empty();
      (exact ? with_spills : without_spills)++;
      auto got = args_from_arginfo(*items, fc.morestack_spills, true);

      // The ArgInfo lists the in-params in ABI order, without the first one when the name
      // has a "[" (meant to drop the dictionary).
      auto in = abi_inputs(*df, (*dw)->types(), go_minor(fx.go_version));
      auto abi = assign_abi_internal((*dw)->types(), in);
      std::vector<const ParamLoc*> abi_args;
      std::vector<const DwarfParam*> args;  // nullptr for a dictionary DWARF leaves out
      for (size_t i = 0, k = 0; i < in.size(); ++i) {
        bool synthetic =
            in[i].name == ".dict" && (k >= df->params.size() || df->params[k].name != ".dict");
        const DwarfParam* dp = synthetic ? nullptr : &df->params[k++];
        if (in[i].is_result) continue;
        abi_args.push_back(&abi[i]);
        args.push_back(dp);
      }
      size_t base = name.find('[') != std::string::npos ? 1 : 0;
      if (base > abi_args.size()) continue;
      abi_args.erase(abi_args.begin(), abi_args.begin() + base);
      args.erase(args.begin(), args.begin() + base);

      for (size_t i = 0; i < got.size() && i < args.size(); ++i) {
        const ParamLoc& g = got[i];
        const ParamLoc& want = *abi_args[i];
        if (exact) ++params;
        // Each register word of the ArgInfo view must be the register DWARF (and the ABI
        // assignment, verified against DWARF above) puts that part of the value in.
        for (const auto& piece : g.loc.pieces) {
          std::string what =
              fmt::format("{} {} (arg{}) +{}", name, want.name, i, piece.value_offset);
          const LocPiece* match = piece_at(want.loc, piece.value_offset);
          if (!exact) {
            ++guessed_words;
            bool right = piece.kind == LocPiece::Stack
                             ? !want.loc.in_registers()
                             : match && match->kind == piece.kind && match->reg == piece.reg;
            if (right) ++guessed_right;
            continue;
          }
          if (piece.kind == LocPiece::Stack) {
            ++stack_words;
            if (!want.loc.pieces.empty() && want.loc.pieces[0].kind == LocPiece::Stack &&
                want.loc.pieces[0].stack_offset + piece.value_offset != piece.stack_offset)
              mismatches.push_back(what + ": stack offset " + piece_str(piece) + " vs " +
                                   want.loc.describe());
            else if (want.loc.in_registers())
              mismatches.push_back(what + ": stack, but the ABI says " + want.loc.describe());
            continue;
          }
          ++reg_words;
          if (!match || match->kind != piece.kind || match->reg != piece.reg) {
            mismatches.push_back(what + ": " + piece_str(piece) + " vs ABI " + want.loc.describe());
            continue;
          }
          // And DWARF itself, where it has an entry location for this argument.
          if (args[i] && args[i]->entry_loc) {
            for (const auto& w : dwarf_words(*args[i]->entry_loc)) {
              if (!w.loc || w.loc->reg == 255 || w.value_offset != piece.value_offset) continue;
              ++dwarf_words_checked;
              if (w.loc->kind != piece.kind || w.loc->reg != piece.reg)
                dwarf_disagrees.push_back(what + ": DWARF says " + piece_str(*w.loc));
            }
          }
        }
      }
    }
    printf(
        "[ stats    ] %s: %d funcs with morestack spills: %d args, %d register words (%d "
        "also in DWARF, %zu of them disagreeing) and %d stack words checked, %zu mismatches; "
        "%d funcs without spills: %d of %d guessed words right\n",
        fx.label().c_str(), with_spills, params, reg_words, dwarf_words_checked,
        dwarf_disagrees.size(), stack_words, mismatches.size(), without_spills, guessed_right,
        guessed_words);
    for (const auto& m : mismatches) ADD_FAILURE() << m;
    for (size_t i = 0; i < dwarf_disagrees.size() && i < 10; ++i)
      printf("             %s\n", dwarf_disagrees[i].c_str());
    EXPECT_GE(reg_words, 500);
    EXPECT_LE(dwarf_disagrees.size() * 50, static_cast<size_t>(dwarf_words_checked));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no stripped+default signatures fixture pair";
}

// ---- DWARF facts that other parts of gotap rely on ----

TEST(DwarfInfo, TypesFuncsAndRuntimeOffsets) {
  auto fixtures = testing::all_fixtures("signatures");
  int checked = 0;
  for (const auto& fx : fixtures) {
    if (fx.flavour != "default") continue;
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok());
    auto dw = DwarfInfo::load(**elf);
    ASSERT_TRUE(dw.ok() && *dw);
    const DwarfInfo& d = **dw;
    EXPECT_EQ(d.producer().rfind("Go cmd/compile go" + fx.go_version, 0), 0u) << d.producer();
    // DWARF 5 from Go 1.25 on.
    EXPECT_EQ(d.version(), fx.go_version >= "1.25" ? 5 : 4);

    const GoType* big = d.types().by_name("main.Big");
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(big->kind, GoKind::Struct);
    EXPECT_EQ(big->size, 80u);
    ASSERT_EQ(big->fields.size(), 10u);
    EXPECT_EQ(big->fields[9].name, "J");
    EXPECT_EQ(big->fields[9].offset, 72u);

    const GoType* m = d.types().by_name("map[string]int");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->kind, GoKind::Map);
    EXPECT_EQ(m->size, 8u);
    ASSERT_NE(d.types().get(m->key), nullptr);
    EXPECT_EQ(d.types().get(m->key)->name, "string");
    EXPECT_EQ(d.types().get(m->elem)->name, "int");
    EXPECT_NE(m->runtime_type, 0u);
    EXPECT_EQ(d.types().by_runtime_type(m->runtime_type)->name, "map[string]int");

    const GoType* e = d.types().by_name("error");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->kind, GoKind::Interface);
    EXPECT_EQ(e->size, 16u);
    EXPECT_EQ(e->fields.size(), 2u);

    const GoType* arr = d.types().by_name("[2]int");
    ASSERT_NE(arr, nullptr);
    EXPECT_EQ(arr->count, 2);
    EXPECT_EQ(d.types().get(arr->elem)->name, "int");
    const GoType* sl = d.types().by_name("[]string");
    ASSERT_NE(sl, nullptr);
    EXPECT_EQ(sl->kind, GoKind::Slice);
    EXPECT_EQ(d.types().get(sl->elem)->name, "string");
    const GoType* ptr = d.types().by_name("*main.Big");
    ASSERT_NE(ptr, nullptr);
    EXPECT_EQ(d.types().get(ptr->elem)->name, "main.Big");
    EXPECT_EQ(d.types().get(ptr->elem)->size, 80u);
    const GoType* named = d.types().by_name("main.Named");
    ASSERT_NE(named, nullptr);
    EXPECT_EQ(named->kind, GoKind::Int);
    EXPECT_EQ(named->size, 8u);

    const DwarfFunc* inc = d.func("main.(*Counter).Inc");
    ASSERT_NE(inc, nullptr);
    ASSERT_EQ(inc->params.size(), 5u);
    EXPECT_EQ(inc->params[0].name, "c");
    EXPECT_EQ(inc->params[2].name, "why");
    EXPECT_FALSE(inc->params[2].is_result);
    EXPECT_TRUE(inc->params[3].is_result);
    EXPECT_TRUE(inc->params[4].is_result);
    EXPECT_LT(inc->low_pc, inc->high_pc);
    // The symbol table (Go's own linker output) agrees on where the function starts.
    const ElfSymbol* sym = (*elf)->symbol("main.(*Counter).Inc");
    ASSERT_NE(sym, nullptr);
    EXPECT_EQ(sym->value, inc->low_pc);

    // DW_AT_go_runtime_type is an offset from moduledata.types: the runtime type found
    // there names the same type (reflect spells package names, not paths).
    auto pcln = Pclntab::load(**elf);
    ASSERT_TRUE(pcln.ok());
    uint64_t types = pcln->moduledata().types, etypes = pcln->moduledata().etypes;
    ASSERT_NE(types, 0u);
    int rt_checked = 0, rt_same = 0;
    std::vector<std::string> rt_diff;
    for (const auto& [id, t] : d.types().all()) {
      if (!t.runtime_type || t.is_typedef) continue;
      ++rt_checked;
      ASSERT_LT(t.runtime_type, etypes - types) << t.name;
      auto str = (*elf)->read_u32(types + t.runtime_type + 40);
      auto tflag = (*elf)->read(types + t.runtime_type + 20, 1);
      ASSERT_TRUE(str && !tflag.empty());
      auto hdr = (*elf)->read(types + *str, 3);
      ASSERT_EQ(hdr.size(), 3u);
      uint64_t len = hdr[1] & 0x7f, skip = 2;
      if (hdr[1] & 0x80) len |= uint64_t(hdr[2]) << 7, skip = 3;
      auto bytes = (*elf)->read(types + *str + skip, len);
      std::string rname(bytes.begin(), bytes.end());
      if (tflag[0] & 2) rname.erase(0, 1);  // TFlagExtraStar
      // Reflect names drop package paths (but keep them inside type arguments) and the
      // "noalg." of compiler-made structs: compare both with paths and "noalg." removed.
      auto norm = [](std::string n) {
        for (size_t at; (at = n.find("noalg.")) != std::string::npos;) n.erase(at, 6);
        for (size_t slash; (slash = n.find('/')) != std::string::npos;) {
          size_t start = slash;
          while (start > 0 && (std::isalnum(static_cast<unsigned char>(n[start - 1])) ||
                               n[start - 1] == '.' || n[start - 1] == '_' || n[start - 1] == '-'))
            --start;
          n.erase(start, slash + 1 - start);
        }
        return n;
      };
      std::string dname = norm(t.name);
      rname = norm(rname);
      if (rname == dname)
        ++rt_same;
      else if (rt_diff.size() < 5)
        rt_diff.push_back(t.name + " vs " + rname);
    }
    printf("[ stats    ] %s: %d runtime types, %d name the same type\n", fx.label().c_str(),
           rt_checked, rt_same);
    for (const auto& m : rt_diff) printf("             %s\n", m.c_str());
    EXPECT_GE(rt_checked, 300);
    EXPECT_GE(rt_same * 100, rt_checked * 95);

    // goid: the per-version table (core/model/runtime_offsets.cpp).
    auto goid = d.member_offset("runtime.g", "goid");
    ASSERT_TRUE(goid.has_value());
    EXPECT_EQ(*goid, (fx.go_version == "1.23" || fx.go_version == "1.24") ? 160u : 152u);

    // Rect.Area is inlined into the autogenerated (*Rect).Area wrapper.
    const auto& inl = d.inlined("main.Rect.Area");
    ASSERT_FALSE(inl.empty());
    EXPECT_NE(inl[0].low_pc, 0u);
    EXPECT_GT(inl[0].call_line, 0);
    EXPECT_FALSE(inl[0].call_file.empty());
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no default signatures fixture";
}

}  // namespace
}  // namespace gotap
