// The Zydis-based function analysis against `go tool objdump` of the same toolchain: RET
// sites, the stack-check prologue, the `push rbp` entry probe and the morestack spills.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <Zydis/Zydis.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/binary/elf_file.h"
#include "core/plan/disasm.h"
#include "core/plan/go_binary.h"
#include "core/plan/x86_quick.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using testing::all_fixtures;
using testing::file_exists;
using testing::read_file;

// ---- Hand-assembled code: the encodings are the ground truth ----

FuncCode analyze(std::vector<uint8_t> b, uint64_t entry = 0x1000) {
  return analyze_function(Bytes(b.data(), b.size()), entry);
}

TEST(Disasm, RetFormsAndPadding) {
  // add rax,rbx; ret; ret 8; int3 int3
  auto fc = analyze({0x48, 0x01, 0xd8, 0xc3, 0xc2, 0x08, 0x00, 0xcc, 0xcc});
  EXPECT_EQ(fc.rets, (std::vector<uint64_t>{0x1003, 0x1004}));
  EXPECT_FALSE(fc.decode_error);
  EXPECT_FALSE(fc.stack_check_jcc);
  EXPECT_FALSE(fc.push_rbp);
}

TEST(Disasm, UndecodableStopsDecoding) {
  // ret; 0x06 (PUSH ES: invalid in 64-bit mode); then a byte that would be a RET
  auto fc = analyze({0xc3, 0x06, 0xc3});
  EXPECT_TRUE(fc.decode_error);
  EXPECT_EQ(fc.decode_error_at, 0x1001u);
  EXPECT_EQ(fc.rets, (std::vector<uint64_t>{0x1000}));
}

TEST(Disasm, TruncatedInstructionIsAnError) {
  auto fc = analyze({0xc3, 0x48, 0x8b});  // mov with its ModRM cut off
  EXPECT_TRUE(fc.decode_error);
  EXPECT_EQ(fc.rets.size(), 1u);
}

TEST(Disasm, GoPrologueAndMorestack) {
  // The Go 1.21+ shape, entry 0x1000, with a morestack path that spills three registers.
  std::vector<uint8_t> b = {
      0x49, 0x3b, 0x66, 0x10,              // 0x1000 cmp rsp,[r14+0x10]
      0x76, 0x0f,                          // 0x1004 jbe 0x1015
      0x55,                                // 0x1006 push rbp
      0x48, 0x89, 0xe5,                    // 0x1007 mov rbp,rsp
      0x5d,                                // 0x100a pop rbp
      0xc3,                                // 0x100b ret
      0x5d,                                // 0x100c pop rbp
      0xe9, 0xee, 0x0f, 0x00, 0x00,        // 0x100d jmp 0x2000 (tail call)
      0xff, 0xe2,                          // 0x1012 jmp rdx (indirect)
      0x90,                                // 0x1014 nop
      0x48, 0x89, 0x44, 0x24, 0x08,        // 0x1015 mov [rsp+8],rax
      0xf2, 0x0f, 0x11, 0x44, 0x24, 0x10,  // 0x101a movsd [rsp+0x10],xmm0
      0x88, 0x5c, 0x24, 0x18,              // 0x1020 mov [rsp+0x18],bl
      0xe8, 0x00, 0x00, 0x00, 0x00,        // 0x1024 call (morestack)
      0xe9, 0xd2, 0xff, 0xff, 0xff,        // 0x1029 jmp 0x1000 (back to entry: not a tail call)
      0xcc, 0xcc,                          // padding
  };
  auto fc = analyze(b);
  EXPECT_FALSE(fc.decode_error);
  EXPECT_EQ(fc.stack_check, std::optional<uint64_t>(0x1000));
  EXPECT_EQ(fc.stack_check_jcc, std::optional<uint64_t>(0x1004));
  EXPECT_EQ(fc.push_rbp, std::optional<uint64_t>(0x1006));
  EXPECT_EQ(fc.rets, (std::vector<uint64_t>{0x100b}));
  EXPECT_EQ(fc.tail_jumps, (std::vector<uint64_t>{0x100d}));
  EXPECT_EQ(fc.indirect_jumps, (std::vector<uint64_t>{0x1012}));
  ASSERT_EQ(fc.morestack_spills.size(), 3u);
  EXPECT_EQ(fc.morestack_spills[0].reg.kind, LocPiece::IntReg);
  EXPECT_EQ(fc.morestack_spills[0].reg.reg, static_cast<uint8_t>(Reg::RAX));
  EXPECT_EQ(fc.morestack_spills[0].reg.size, 8u);
  EXPECT_EQ(fc.morestack_spills[0].spill_offset, 8);
  EXPECT_EQ(fc.morestack_spills[1].reg.kind, LocPiece::FloatReg);
  EXPECT_EQ(fc.morestack_spills[1].reg.reg, 0);
  EXPECT_EQ(fc.morestack_spills[1].spill_offset, 16);
  EXPECT_EQ(fc.morestack_spills[2].reg.reg, static_cast<uint8_t>(Reg::RBX));
  EXPECT_EQ(fc.morestack_spills[2].reg.size, 1u);
  EXPECT_EQ(fc.morestack_spills[2].spill_offset, 24);
}

TEST(Disasm, PreRegabiPrologue) {
  // mov rcx,fs:[-8]; cmp rsp,[rcx+0x10]; jbe +0; sub rsp,0x18; ret
  auto fc = analyze({0x64, 0x48, 0x8b, 0x0c, 0x25, 0xf8, 0xff, 0xff, 0xff,  // 0x1000
                     0x48, 0x3b, 0x61, 0x10,                                // 0x1009
                     0x76, 0x05,                                            // 0x100d
                     0x48, 0x83, 0xec, 0x18,                                // 0x100f
                     0xc3,                                                  // 0x1013
                     0xc3});                                                // 0x1014
  EXPECT_EQ(fc.stack_check, std::optional<uint64_t>(0x1009));
  EXPECT_EQ(fc.stack_check_jcc, std::optional<uint64_t>(0x100d));
  EXPECT_FALSE(fc.push_rbp);
  std::vector<uint8_t> fsload = {0x64, 0x48, 0x8b, 0x0c, 0x25, 0xf8, 0xff, 0xff, 0xff};
  EXPECT_EQ(fs_load_offset(Bytes(fsload.data(), fsload.size())), std::optional<int64_t>(-8));
}

TEST(Disasm, InstructionLength) {
  std::vector<uint8_t> b = {0x48, 0x89, 0x44, 0x24, 0x08, 0xc3};
  EXPECT_EQ(instruction_length(Bytes(b.data(), b.size()), 0), 5u);
  EXPECT_EQ(instruction_length(Bytes(b.data() + 5, 1), 5), 1u);
  EXPECT_EQ(instruction_length(Bytes(), 0), 0u);
  std::vector<uint8_t> bad = {0x06};
  EXPECT_EQ(instruction_length(Bytes(bad.data(), bad.size()), 0), 0u);
}

// ---- Go fixtures against `go tool objdump` ----

struct ObjInsn {
  uint64_t addr = 0;
  std::string text;  // Go assembler syntax, e.g. "MOVQ AX, 0x8(SP)"
};
struct ObjFunc {
  std::string name;
  std::vector<ObjInsn> insns;
  bool undecoded = false;  // objdump printed "?": its decoder does not know the instruction
};

std::vector<ObjFunc> parse_objdump(const std::string& text) {
  std::vector<ObjFunc> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("TEXT ", 0) == 0) {
      ObjFunc f;
      auto sb = line.rfind("(SB)");
      f.name = line.substr(5, sb == std::string::npos ? std::string::npos : sb - 5);
      out.push_back(std::move(f));
      continue;
    }
    if (out.empty() || line.size() < 3 || line[0] != ' ') continue;
    std::vector<std::string> fields;
    std::string cur;
    std::istringstream ls(line);
    while (std::getline(ls, cur, '\t')) {
      auto b = cur.find_first_not_of(' ');
      auto e = cur.find_last_not_of(' ');
      if (b != std::string::npos) fields.push_back(cur.substr(b, e - b + 1));
    }
    if (fields.size() < 3 || fields[1].rfind("0x", 0) != 0) continue;
    ObjInsn i;
    i.addr = std::stoull(fields[1], nullptr, 16);
    i.text = fields.size() > 3 ? fields[3] : "";
    if (i.text == "?") out.back().undecoded = true;
    out.back().insns.push_back(std::move(i));
  }
  return out;
}

// Go register name -> LocPiece, for the spills objdump prints.
std::optional<LocPiece> go_reg(const std::string& r) {
  static const std::map<std::string, int> kInt = {{"AX", 0},
                                                  {"BX", 1},
                                                  {"CX", 2},
                                                  {"DI", 3},
                                                  {"SI", 4},
                                                  {"R8", 5},
                                                  {"R9", 6},
                                                  {"R10", 7},
                                                  {"R11", 8},
                                                  // byte registers as Go prints them
                                                  {"AL", 0},
                                                  {"BL", 1},
                                                  {"CL", 2},
                                                  {"DIB", 3},
                                                  {"SIB", 4},
                                                  {"R8B", 5},
                                                  {"R9B", 6},
                                                  {"R10B", 7},
                                                  {"R11B", 8}};
  LocPiece p;
  if (auto it = kInt.find(r); it != kInt.end()) {
    p.kind = LocPiece::IntReg;
    p.reg = static_cast<uint8_t>(it->second);
    return p;
  }
  if (r.size() >= 2 && r[0] == 'X') {
    p.kind = LocPiece::FloatReg;
    p.reg = static_cast<uint8_t>(std::stoi(r.substr(1)));
    return p;
  }
  return std::nullopt;
}

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

TEST(Disasm, MatchesGoObjdump) {
  auto fixtures = all_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no Go fixtures built in " << testing::fixtures_dir();
  int checked_files = 0;
  for (const auto& fx : fixtures) {
    std::string od_path = fx.path + ".objdump";
    if (!file_exists(od_path) || !file_exists(fx.path + ".gosym.json")) continue;
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok()) << elf.error().what();
    auto gosym = nlohmann::json::parse(read_file(fx.path + ".gosym.json"));
    std::map<uint64_t, uint64_t> end_of;  // entry -> end, from debug/gosym
    for (const auto& f : gosym["funcs"])
      end_of[std::stoull(f["entry"].get<std::string>(), nullptr, 16)] =
          std::stoull(f["end"].get<std::string>(), nullptr, 16);
    int major = 0, minor = 0;
    std::sscanf(fx.go_version.c_str(), "%d.%d", &major, &minor);
    const bool push_rbp_era = major > 1 || minor >= 21;

    int checked = 0, skipped = 0, main_funcs = 0, with_push = 0;
    for (const auto& of : parse_objdump(read_file(od_path))) {
      if (of.insns.empty()) continue;
      const bool is_main = starts_with(of.name, "main.");
      // Go 1.27's objdump decodes some VEX instructions, with wrong lengths: `c5 f8 77` is
      // VZEROUPPER (3 bytes), listed as 5 bytes, after which it lists a RET's byte as part of
      // an ANDL. So a listing with VEX mnemonics is no reference either.
      const bool vex = std::any_of(of.insns.begin(), of.insns.end(), [](const ObjInsn& i) {
        return i.text.size() > 1 && i.text[0] == 'V' && std::isupper(i.text[1]) &&
               i.text.rfind("VERR", 0) != 0 && i.text.rfind("VERW", 0) != 0;
      });
      if (of.undecoded || vex) {
        // Go's x86asm does not know VEX/EVEX instructions and resynchronises byte by byte,
        // so its listing is no reference there. Only the runtime's assembly has them.
        EXPECT_FALSE(is_main) << of.name;
        ++skipped;
        continue;
      }
      SCOPED_TRACE(of.name);
      uint64_t entry = of.insns.front().addr;
      auto e = end_of.find(entry);
      ASSERT_NE(e, end_of.end()) << "objdump function not in gosym";
      auto code = (*elf)->read(entry, e->second - entry);
      ASSERT_FALSE(code.empty());
      FuncCode fc = analyze_function(code, entry);
      EXPECT_FALSE(fc.decode_error) << std::hex << fc.decode_error_at;

      std::vector<uint64_t> want_rets;
      std::map<uint64_t, size_t> at;  // addr -> index in insns
      for (size_t k = 0; k < of.insns.size(); ++k) {
        at[of.insns[k].addr] = k;
        if (starts_with(of.insns[k].text, "RET")) want_rets.push_back(of.insns[k].addr);
      }
      EXPECT_EQ(fc.rets, want_rets);
      ++checked;

      // Stack check: objdump's CMP of SP (or R12 = SP-N) with 16(R14)/16(CX), then JBE.
      std::optional<uint64_t> want_jcc;
      for (size_t k = 0; k + 1 < of.insns.size() && k < 6; ++k) {
        const auto& t = of.insns[k].text;
        bool guard = t.find("0x10(R14)") != std::string::npos ||
                     t.find("0x18(R14)") != std::string::npos ||
                     t.find("0x10(CX)") != std::string::npos;
        if (starts_with(t, "CMPQ") && guard && starts_with(of.insns[k + 1].text, "JBE ")) {
          want_jcc = of.insns[k + 1].addr;
          break;
        }
      }
      EXPECT_EQ(fc.stack_check_jcc, want_jcc);
      if (!fc.stack_check_jcc || !want_jcc) continue;

      // push rbp: exactly when objdump shows PUSHQ BP right after the JBE.
      size_t jk = at[*want_jcc];
      bool want_push = jk + 1 < of.insns.size() && of.insns[jk + 1].text == "PUSHQ BP";
      EXPECT_EQ(fc.push_rbp.has_value(), want_push);
      if (fc.push_rbp) {
        EXPECT_EQ(fc.push_rbp, of.insns[jk + 1].addr);
        EXPECT_EQ((*elf)->read(*fc.push_rbp, 1)[0], 0x55);
        ++with_push;
      }
      if (is_main && !of.name.ends_with(".abi0")) {
        ++main_funcs;
        // Go 1.21+ compilers push BP; older ones store it with a MOV after SUB SP.
        EXPECT_EQ(fc.push_rbp.has_value(), push_rbp_era);
      }

      // Morestack spills: objdump's `MOVx REG, off(SP)` lines from the JBE target to CALL.
      static const std::regex kSpill(R"(^MOV\w* (\w+), (?:0x([0-9a-f]+))?\(SP\)$)");
      std::smatch sm;
      std::vector<std::pair<LocPiece, int64_t>> want_spills;
      const std::string& jbe = of.insns[jk].text;
      uint64_t target = std::stoull(jbe.substr(jbe.find("0x")), nullptr, 16);
      for (auto it = at.find(target); it != at.end(); ++it) {
        const auto& t = of.insns[it->second].text;
        if (starts_with(t, "CALL")) break;
        if (std::regex_match(t, sm, kSpill)) {
          if (auto r = go_reg(sm[1].str()))
            want_spills.emplace_back(*r, sm[2].matched ? std::stoll(sm[2].str(), nullptr, 16) : 0);
        }
      }
      ASSERT_EQ(fc.morestack_spills.size(), want_spills.size());
      for (size_t k = 0; k < want_spills.size(); ++k) {
        EXPECT_EQ(fc.morestack_spills[k].reg.kind, want_spills[k].first.kind);
        EXPECT_EQ(fc.morestack_spills[k].reg.reg, want_spills[k].first.reg);
        EXPECT_EQ(fc.morestack_spills[k].spill_offset, want_spills[k].second);
      }
    }
    EXPECT_GT(checked, 0);
    EXPECT_GT(main_funcs, 0);
    if (push_rbp_era) {
      EXPECT_GT(with_push, 0);
    }
    // Only assembly with AVX is beyond objdump; the listing is mostly checkable.
    EXPECT_LT(skipped * 20, checked + 1);
    ++checked_files;
  }
  if (checked_files == 0) GTEST_SKIP() << "no fixture has a .objdump reference";
}

// ---- One decode shared by the RET sites and the blocks ----

// The definition, decoded here on its own: every RET, every JMP with an immediate target
// outside the function (a tail call), every JMP through a register or memory.
struct Exits {
  std::vector<uint64_t> rets, tail_jumps, indirect_jumps;
  std::optional<uint64_t> error_at;
};
Exits exits_by_zydis(Bytes code, uint64_t entry) {
  ZydisDecoder d;
  ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  Exits e;
  for (size_t off = 0; off < code.size();) {
    ZydisDecodedInstruction in;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    const uint64_t pc = entry + off;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, code.data() + off, code.size() - off, &in, ops))) {
      e.error_at = pc;
      break;
    }
    if (in.mnemonic == ZYDIS_MNEMONIC_RET) e.rets.push_back(pc);
    if (in.mnemonic == ZYDIS_MNEMONIC_JMP && in.operand_count_visible >= 1) {
      ZyanU64 t = 0;
      if (ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
        e.indirect_jumps.push_back(pc);
      else if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[0], pc, &t)) &&
               (t < entry || t >= entry + code.size()))
        e.tail_jumps.push_back(pc);
    }
    off += in.length;
  }
  return e;
}

TEST(Disasm, SharedDecodeGivesTheExitsOfAFreshDecode) {
  size_t checked = 0;
  for (const auto& fx : all_fixtures("inlined")) {
    if (fx.flavour != "default" && fx.flavour != "cgo") continue;
    SCOPED_TRACE(fx.label());
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    for (const auto& f : (*bin)->pclntab().all_funcs()) {
      if (f.end <= f.entry) continue;
      Bytes code = (*bin)->elf().read(f.entry, f.end - f.entry);
      const Exits want = exits_by_zydis(code, f.entry);
      for (bool dominators : {true, false}) {
        const FuncCode got =
            analyze_function(code, f.entry, decode_blocks(code, f.entry, dominators));
        ASSERT_EQ(got.rets, want.rets) << f.name;
        ASSERT_EQ(got.tail_jumps, want.tail_jumps) << f.name;
        ASSERT_EQ(got.indirect_jumps, want.indirect_jumps) << f.name;
        ASSERT_EQ(got.decode_error, want.error_at.has_value()) << f.name;
        if (want.error_at) {
          ASSERT_EQ(got.decode_error_at, *want.error_at) << f.name;
        }
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u) << "fixture 'inlined' not built in " << testing::fixtures_dir();
}

// decode_blocks' instructions as a full Zydis decode gives them (operands of every branch
// decoded), for comparing its minimal decode with.
CodeBlocks blocks_by_full_decode(Bytes code, uint64_t entry) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  CodeBlocks out;
  std::vector<uint64_t> targets;
  bool next_leads = true, after_call = false;
  for (size_t off = 0; off < code.size();) {
    ZydisDecodedInstruction in;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(
            ZydisDecoderDecodeFull(&dec, code.data() + off, code.size() - off, &in, ops))) {
      out.error_at = entry + off;
      return out;
    }
    CodeInsn ci;
    ci.pc = entry + off;
    ci.len = in.length;
    ci.leader = next_leads;
    ci.nop1 = in.length == 1 && code[off] == 0x90 && !after_call;
    after_call = in.meta.category == ZYDIS_CATEGORY_CALL;
    if (in.mnemonic == ZYDIS_MNEMONIC_RET) ci.flags |= CodeInsn::kRet;
    next_leads = false;
    const bool jmp = in.mnemonic == ZYDIS_MNEMONIC_JMP;
    const bool branch =
        in.meta.category == ZYDIS_CATEGORY_COND_BR || in.meta.category == ZYDIS_CATEGORY_UNCOND_BR;
    if (branch || jmp) {
      ZyanU64 t = 0;
      const bool has = in.operand_count_visible >= 1;
      const bool direct = has && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                          ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[0], ci.pc, &t));
      if (jmp && direct) ci.flags |= CodeInsn::kJmpDirect;
      if (jmp && has && ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
        ci.flags |= CodeInsn::kJmpIndirect;
      if (branch) {
        next_leads = true;
        if (direct) {
          targets.push_back(t);
        } else {
          out.indirect = true;
        }
        if (in.meta.category == ZYDIS_CATEGORY_UNCOND_BR) ci.falls_through = false;
      }
      if (direct) ci.target = t;
    }
    if (in.meta.category == ZYDIS_CATEGORY_RET || in.meta.category == ZYDIS_CATEGORY_INTERRUPT ||
        in.mnemonic == ZYDIS_MNEMONIC_UD2) {
      next_leads = true;
      ci.falls_through = false;
    }
    out.insns.push_back(ci);
    off += in.length;
  }
  for (uint64_t t : targets)
    if (int64_t k = out.index_of(t); k >= 0) out.insns[k].leader = true;
  out.complete = true;
  return out;
}

::testing::AssertionResult same_blocks(const CodeBlocks& got, const CodeBlocks& want) {
  if (got.complete != want.complete || got.error_at != want.error_at ||
      got.indirect != want.indirect || got.insns.size() != want.insns.size())
    return ::testing::AssertionFailure()
           << "complete " << got.complete << "/" << want.complete << ", error_at " << got.error_at
           << "/" << want.error_at << ", " << got.insns.size() << "/" << want.insns.size()
           << " instructions";
  for (size_t i = 0; i < got.insns.size(); ++i) {
    const CodeInsn &a = got.insns[i], &b = want.insns[i];
    if (a.pc != b.pc || a.len != b.len || a.leader != b.leader || a.nop1 != b.nop1 ||
        a.falls_through != b.falls_through || a.target != b.target || a.flags != b.flags)
      return ::testing::AssertionFailure() << "instruction at " << std::hex << a.pc << "/" << b.pc;
  }
  return ::testing::AssertionSuccess();
}

// decode_blocks decodes in Zydis' minimal mode (no operands), reading a branch's target from
// its raw immediate: the same instructions, leaders, targets and exits as a full decode, on
// random bytes (every encoding Zydis knows, branches made common) and on the code of real
// programs.
TEST(Disasm, MinimalDecodeAgreesWithTheFullOne) {
  std::mt19937_64 rng(22);
  size_t branches = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint8_t> b(64);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    // Branch opcodes at random places: short and near Jcc, JMP, CALL, JMP/CALL r/m, LOOP/JRCXZ.
    for (int k = 0; k < 8; ++k) {
      const size_t at = rng() % (b.size() - 2);
      static const uint8_t kOps[] = {0x70, 0x7f, 0xe8, 0xe9, 0xeb, 0xff, 0xe0, 0xe3, 0x0f, 0x66};
      b[at] = kOps[rng() % sizeof kOps];
      if (b[at] == 0x0f) b[at + 1] = static_cast<uint8_t>(0x80 + rng() % 16);
    }
    const uint64_t entry = 0x400000 + rng() % 0x100000;
    const Bytes code(b.data(), b.size());
    const CodeBlocks want = blocks_by_full_decode(code, entry);
    for (const auto& in : want.insns) branches += in.target != 0 || in.flags != 0;
    ASSERT_TRUE(same_blocks(decode_blocks(code, entry, false), want)) << "round " << round;
  }
  EXPECT_GT(branches, 10000u);
  size_t funcs = 0;
  std::vector<std::string> paths;
  for (const auto& fx : all_fixtures("inlined"))
    if (fx.flavour == "default" || fx.flavour == "cgo") paths.push_back(fx.path);
  const std::string caddy = testing::fixtures_dir() + "/real/caddy/caddy";
  if (file_exists(caddy)) paths.push_back(caddy);
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    auto bin = GoBinary::open(path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    for (const auto& f : (*bin)->pclntab().all_funcs()) {
      if (f.end <= f.entry) continue;
      Bytes code = (*bin)->elf().read(f.entry, f.end - f.entry);
      ASSERT_TRUE(
          same_blocks(decode_blocks(code, f.entry, false), blocks_by_full_decode(code, f.entry)))
          << f.name;
      ++funcs;
    }
  }
  EXPECT_GT(funcs, 0u) << "fixture 'inlined' not built in " << testing::fixtures_dir();
}

// ---- quick_decode: the table decoder answers as Zydis does, or not at all ----

// Zydis' answer for one instruction, in quick_decode's terms: nullopt when it does not decode.
std::optional<QuickInsn> zydis_answer(const uint8_t* p, size_t n) {
  static const ZydisDecoder dec = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p, n, &in, ops))) return std::nullopt;
  QuickInsn q;
  q.len = in.length;
  const bool imm = in.operand_count_visible >= 1 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
  if (in.mnemonic == ZYDIS_MNEMONIC_RET) {
    q.flow = QuickInsn::kRet;
  } else if (in.meta.category == ZYDIS_CATEGORY_CALL) {
    q.flow = QuickInsn::kCall;
    if (imm) q.rel = static_cast<int32_t>(ops[0].imm.value.s);
  } else if (in.mnemonic == ZYDIS_MNEMONIC_JMP) {
    q.flow = imm ? QuickInsn::kJmp : QuickInsn::kJmpIndirect;
    if (imm) q.rel = static_cast<int32_t>(ops[0].imm.value.s);
  } else if (in.meta.category == ZYDIS_CATEGORY_COND_BR) {
    q.flow = QuickInsn::kJcc;
    if (imm) q.rel = static_cast<int32_t>(ops[0].imm.value.s);
  } else if (in.mnemonic == ZYDIS_MNEMONIC_INT3) {
    q.flow = QuickInsn::kInt3;
  } else if (in.mnemonic == ZYDIS_MNEMONIC_UD2) {
    q.flow = QuickInsn::kUd2;
  } else if (in.meta.category == ZYDIS_CATEGORY_RET || in.meta.category == ZYDIS_CATEGORY_COND_BR ||
             in.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
             in.meta.category == ZYDIS_CATEGORY_INTERRUPT) {
    // A flow quick_decode has no name for (LOOP, IRET, INT n...): it must not answer.
    q.flow = static_cast<QuickInsn::Flow>(255);
  }
  return q;
}

// Empty when quick_decode, answering for p[0, n), agrees with Zydis; else what differs.
std::string quick_disagrees(const uint8_t* p, size_t n, bool* answered) {
  QuickInsn q;
  *answered = quick_decode(p, n, q);
  if (!*answered) return "";
  auto z = zydis_answer(p, n);
  std::ostringstream bytes;
  for (size_t i = 0; i < std::min<size_t>(n, 15); ++i) bytes << std::hex << int(p[i]) << ' ';
  if (!z) return "quick decoded bytes Zydis refuses: " + bytes.str();
  if (z->len != q.len || z->flow != q.flow || z->rel != q.rel)
    return "length " + std::to_string(q.len) + "/" + std::to_string(z->len) + ", flow " +
           std::to_string(q.flow) + "/" + std::to_string(z->flow) + ", rel " +
           std::to_string(q.rel) + "/" + std::to_string(z->rel) + ": " + bytes.str();
  return "";
}

// Random instructions shaped like real ones (prefixes, REX, one- and two-byte opcodes, then
// random ModRM, SIB, displacement and immediate bytes), cut at random lengths, and plain
// random bytes: wherever quick_decode answers, Zydis decodes the same length and flow. Then
// every instruction of real programs, where it must also answer for most of them (it is
// there to be fast on Go's code).
TEST(Disasm, QuickDecodeAgreesWithZydis) {
  std::mt19937_64 rng(2026);
  static const uint8_t kPrefixes[] = {0x66, 0xf2, 0xf3, 0x2e, 0x3e, 0x26,
                                      0x36, 0x64, 0x65, 0xf0, 0x67};
  size_t answered = 0, tried = 0;
  uint8_t b[32];
  for (int round = 0; round < 1'000'000; ++round) {
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    size_t k = 0;
    if (round % 4 != 0) {  // shaped: one in four stays plain random bytes
      const int npre = static_cast<int>(rng() % 4);
      for (int j = 0; j < npre; ++j) b[k++] = kPrefixes[rng() % sizeof kPrefixes];
      if (rng() % 2) b[k++] = static_cast<uint8_t>(0x40 + rng() % 16);
      if (rng() % 3 == 0) b[k++] = 0x0f;
      ++k;  // the opcode: random
    }
    const size_t n = (round % 8 == 0) ? 1 + rng() % 15 : sizeof b;
    bool yes = false;
    const std::string why = quick_disagrees(b, n, &yes);
    ASSERT_EQ(why, "") << "round " << round;
    answered += yes;
    ++tried;
  }
  EXPECT_GT(answered, tried / 5) << "quick_decode answers too rarely to be tested";

  std::vector<std::string> paths;
  for (const auto& fx : all_fixtures("inlined"))
    if (fx.flavour == "default" || fx.flavour == "cgo") paths.push_back(fx.path);
  const std::string caddy = testing::fixtures_dir() + "/real/caddy/caddy";
  if (file_exists(caddy)) paths.push_back(caddy);
  ASSERT_FALSE(paths.empty()) << "fixture 'inlined' not built in " << testing::fixtures_dir();
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    auto bin = GoBinary::open(path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    size_t insns = 0, quick = 0;
    for (const auto& f : (*bin)->pclntab().all_funcs()) {
      if (f.end <= f.entry) continue;
      Bytes code = (*bin)->elf().read(f.entry, f.end - f.entry);
      for (size_t off = 0; off < code.size();) {
        auto z = zydis_answer(code.data() + off, code.size() - off);
        if (!z) break;  // data in the text: the blocks' decoder stops there too
        bool yes = false;
        const std::string why = quick_disagrees(code.data() + off, code.size() - off, &yes);
        ASSERT_EQ(why, "") << f.name << "+" << off;
        quick += yes;
        ++insns;
        off += z->len;
      }
    }
    // Measured: 97 to 99% of Go's instructions; below 90 the tables lost something common.
    EXPECT_GT(quick * 10, insns * 9) << quick << " of " << insns << " instructions";
  }
}

}  // namespace
}  // namespace gotap
