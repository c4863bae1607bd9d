// Where a 5-byte jump can replace a probe site (core/plan/jump_site.h): hand-assembled code,
// whose encodings are the truth, and every function of the Go fixtures against `go tool
// objdump` of the same toolchain (instruction boundaries, branch targets, operands).
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/binary/elf_file.h"
#include "core/plan/disasm.h"
#include "core/plan/go_binary.h"
#include "core/plan/jump_site.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using testing::all_fixtures;
using testing::file_exists;
using testing::read_file;

constexpr uint64_t kAt = 0x1000;

struct Code {
  std::vector<uint8_t> bytes;
  CodeBlocks blocks;
  explicit Code(std::vector<uint8_t> b) : bytes(std::move(b)) {
    blocks = decode_blocks(span(), kAt, false);
  }
  Bytes span() const { return Bytes(bytes.data(), bytes.size()); }
  JumpSite entry(uint64_t off) const { return entry_jump_site(span(), kAt, blocks, kAt + off); }
  JumpSite ret(uint64_t off) const { return ret_jump_site(span(), kAt, blocks, kAt + off); }
};

// Go 1.21+'s prologue and epilogue: cmp rsp,[r14+0x10]; jbe morestack; push rbp; mov rbp,rsp;
// sub rsp,0x18; (body) add rsp,0x18; pop rbp; ret; morestack: call; jmp entry.
const std::vector<uint8_t> kFramed = {
    0x49, 0x3b, 0x66, 0x10,        // 0x00 cmp rsp,[r14+0x10]
    0x76, 0x11,                    // 0x04 jbe 0x17
    0x55,                          // 0x06 push rbp
    0x48, 0x89, 0xe5,              // 0x07 mov rbp,rsp
    0x48, 0x83, 0xec, 0x18,        // 0x0a sub rsp,0x18
    0x48, 0x83, 0xc4, 0x18,        // 0x0e add rsp,0x18
    0x5d,                          // 0x12 pop rbp
    0xc3,                          // 0x13 ret
    0x90, 0x90, 0x90,              // 0x14 nops
    0xe8, 0x00, 0x00, 0x00, 0x00,  // 0x17 call (next)
    0xeb, 0xe2,                    // 0x1c jmp 0x00
};

TEST(JumpSite, FramedPrologueAndEpilogue) {
  Code c(kFramed);
  const JumpSite e = c.entry(0x06);
  ASSERT_TRUE(e.ok()) << e.refused;
  EXPECT_EQ(e.at, kAt + 0x06);
  EXPECT_EQ(e.len, 8) << "push, mov and sub: whole instructions, at least 5 bytes";
  const JumpSite r = c.ret(0x13);
  ASSERT_TRUE(r.ok()) << r.refused;
  EXPECT_EQ(r.at, kAt + 0x0e) << "from the add: add, pop and the ret";
  EXPECT_EQ(r.len, 6);
}

// A larger frame's stack check: lea r12,[rsp-0x100]; cmp r12,[r14+0x10]; jbe rel32.
const std::vector<uint8_t> kLargerFrame = {0x4c, 0x8d, 0xa4, 0x24, 0x00, 0xff,
                                           0xff, 0xff,              // 0x00 lea r12,[rsp-0x100]
                                           0x4d, 0x3b, 0x66, 0x10,  // 0x08 cmp r12,[r14+0x10]
                                           0x0f, 0x86, 0x02, 0x00, 0x00, 0x00,  // 0x0c jbe 0x14
                                           0x55, 0xc3,                    // 0x12 push rbp; ret
                                           0xe8, 0x00, 0x00, 0x00, 0x00,  // 0x14 call (next)
                                           0xeb, 0xe5};                   // 0x19 jmp 0x00

TEST(JumpSite, StackCheckWithItsJbe) {
  Code c(kFramed);
  const JumpSite s = stack_check_jump_site(c.span(), kAt, c.blocks, kAt, kAt + 0x04);
  ASSERT_TRUE(s.ok()) << s.refused;
  EXPECT_EQ(s.at, kAt);
  EXPECT_EQ(s.len, 6) << "cmp and jbe";
  EXPECT_EQ(s.branch_len, 2);
  EXPECT_EQ(s.branch_to, kAt + 0x17) << "the morestack path";
  // Not a stack check: the jbe must follow the cmp.
  EXPECT_FALSE(stack_check_jump_site(c.span(), kAt, c.blocks, kAt + 0x06, kAt + 0x07).ok());
  EXPECT_FALSE(stack_check_jump_site(c.span(), kAt, c.blocks, kAt, kAt + 0x06).ok());
  // A larger frame's: lea r12,[rsp-0x100]; cmp r12,[r14+0x10]; jbe. The lea stays: a goroutine
  // may be parked right after it.
  Code big(kLargerFrame);
  const JumpSite b = stack_check_jump_site(big.span(), kAt, big.blocks, kAt + 0x08, kAt + 0x0c);
  ASSERT_TRUE(b.ok()) << b.refused;
  EXPECT_EQ(b.at, kAt + 0x08);
  EXPECT_EQ(b.len, 10) << "cmp and a rel32 jbe";
  EXPECT_EQ(b.branch_len, 6);
  EXPECT_EQ(b.branch_to, kAt + 0x14);
}

TEST(JumpSite, StackCheckBranchAlone) {
  // The trampoline backend's site: the jbe alone, its compare left in place.
  Code big(kLargerFrame);
  const JumpSite b = stack_check_branch_site(big.span(), kAt, big.blocks, kAt + 0x08, kAt + 0x0c);
  ASSERT_TRUE(b.ok()) << b.refused;
  EXPECT_EQ(b.at, kAt + 0x0c);
  EXPECT_EQ(b.len, 6);
  EXPECT_EQ(b.branch_len, 6);
  EXPECT_EQ(b.branch_to, kAt + 0x14);
  // A short function's 2-byte jbe has no room.
  Code c(kFramed);
  const JumpSite s = stack_check_branch_site(c.span(), kAt, c.blocks, kAt, kAt + 0x04);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.refused, "a short function: its stack check's jbe is 2 bytes");
  // What the check itself refuses stays refused.
  EXPECT_FALSE(stack_check_branch_site(big.span(), kAt, big.blocks, kAt + 0x12, kAt + 0x13).ok());
}

TEST(JumpSite, RefusesWhatCannotRunElsewhere) {
  // The stack check itself: its cmp reads g (refused as any load off the stack is).
  EXPECT_EQ(Code(kFramed).entry(0x00).refused, "a memory access that can fault (off the stack)");
  // A load from the heap (a Go nil check faults there): mov rax,[rbx+8]; mov rcx,rax; ret.
  Code load({0x48, 0x8b, 0x43, 0x08, 0x48, 0x89, 0xc1, 0xc3});
  EXPECT_EQ(load.entry(0).refused, "a memory access that can fault (off the stack)");
  // RIP-relative: lea rax,[rip+0x10]; ret. Not relocated yet.
  Code rip({0x48, 0x8d, 0x05, 0x10, 0x00, 0x00, 0x00, 0xc3});
  EXPECT_EQ(rip.entry(0).refused, "a RIP-relative operand");
  // A jump into the bytes: xor eax,eax; test rbx,rbx; je +2 (to the mov); nop; nop;
  // mov ecx,1; ret: the RET's block starts at the mov, the jump's target, with 6 bytes.
  Code target(
      {0x31, 0xc0, 0x48, 0x85, 0xdb, 0x74, 0x02, 0x90, 0x90, 0xb9, 0x01, 0x00, 0x00, 0x00, 0xc3});
  EXPECT_TRUE(target.entry(0).ok()) << "xor and test: 5 bytes";
  EXPECT_EQ(target.entry(2).refused, "a jump or a call") << "test and je";
  const JumpSite r = target.ret(0x0e);
  ASSERT_TRUE(r.ok()) << r.refused;
  EXPECT_EQ(r.at, kAt + 0x09);
  EXPECT_EQ(target.entry(0x07).refused, "a jump lands inside the 5 bytes");
  // A frameless leaf: the RET's block has 3 bytes (mov eax,ebx; ret) after a branch target.
  Code leaf({0x48, 0x85, 0xc0, 0x74, 0x00, 0x89, 0xd8, 0xc3});
  EXPECT_EQ(leaf.ret(0x07).refused, "fewer than 5 bytes in the RET's block");
  // Stack memory is fine: mov [rsp+8],rax; mov rbx,[rbp-8]; ret.
  Code stack({0x48, 0x89, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5d, 0xf8, 0xc3});
  EXPECT_TRUE(stack.entry(0).ok());
  EXPECT_TRUE(stack.ret(0x09).ok());
}

// ---- Every function of the Go fixtures against `go tool objdump` ----

struct ObjInsn {
  uint64_t addr = 0;
  std::string text;  // Go assembler syntax, e.g. "MOVQ AX, 0x8(SP)"
  unsigned len = 0;  // from the bytes objdump prints
};
struct ObjFunc {
  std::vector<ObjInsn> insns;
  bool undecoded = false;
};

std::vector<ObjFunc> parse_objdump(const std::string& text) {
  std::vector<ObjFunc> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("TEXT ", 0) == 0) {
      out.emplace_back();
      continue;
    }
    if (out.empty() || line.size() < 3 || line[0] != ' ') continue;
    std::vector<std::string> fields;
    std::istringstream ls(line);
    for (std::string cur; std::getline(ls, cur, '\t');) {
      const auto b = cur.find_first_not_of(' ');
      const auto e = cur.find_last_not_of(' ');
      if (b != std::string::npos) fields.push_back(cur.substr(b, e - b + 1));
    }
    if (fields.size() < 3 || fields[1].rfind("0x", 0) != 0) continue;
    ObjInsn i{std::stoull(fields[1], nullptr, 16), fields.size() > 3 ? fields[3] : "",
              unsigned(fields[2].size() / 2)};
    // Go's x86asm does not know VEX/EVEX and resynchronises byte by byte: no reference there.
    if (i.text == "?" || (i.text.size() > 1 && i.text[0] == 'V' && std::isupper(i.text[1]) &&
                          i.text.rfind("VERR", 0) != 0 && i.text.rfind("VERW", 0) != 0))
      out.back().undecoded = true;
    out.back().insns.push_back(std::move(i));
  }
  return out;
}

bool is_branch(const std::string& t) {
  return t.rfind("J", 0) == 0 || t.rfind("CALL", 0) == 0 || t.rfind("RET", 0) == 0 ||
         t.rfind("INT", 0) == 0 || t.rfind("UD2", 0) == 0 || t.rfind("SYSCALL", 0) == 0;
}

// Why objdump's view of [at, at+len) says the range cannot be displaced ("" when it can).
std::string objdump_refuses(const ObjFunc& f, const std::set<uint64_t>& targets, const JumpSite& s,
                            bool ret, bool g_load = false) {
  auto first = std::find_if(f.insns.begin(), f.insns.end(),
                            [&](const ObjInsn& i) { return i.addr == s.at; });
  if (first == f.insns.end()) return "not at an instruction";
  const uint64_t stop = s.at + s.len;
  if (std::none_of(f.insns.begin(), f.insns.end(),
                   [&](const ObjInsn& i) { return i.addr + i.len == stop; }))
    return "does not end at an instruction's end";
  for (auto i = first; i != f.insns.end() && i->addr < stop; ++i) {
    if (i != first && targets.count(i->addr)) return "a branch target inside: " + i->text;
    const bool last = std::next(i) == f.insns.end() || std::next(i)->addr >= stop;
    if (is_branch(i->text) && !(ret && last && i->text.rfind("RET", 0) == 0))
      return "a branch: " + i->text;
    if (i->text.find("(IP)") != std::string::npos) return "RIP-relative: " + i->text;
    if (i->text.rfind("LEA", 0) == 0) continue;
    // The stack check's compare with g.stackguard0 (or 1): "CMPQ 0x10(R14), SP", or in
    // assembly "CMPQ SP, 0x10(R14)".
    if (g_load &&
        std::regex_match(i->text, std::regex(R"(CMPQ (0x1[08]\(R14\), \w+|\w+, 0x1[08]\(R14\)))")))
      continue;
    for (size_t p = i->text.find('('); p != std::string::npos; p = i->text.find('(', p + 1))
      if (i->text.compare(p, 4, "(SP)") != 0 && i->text.compare(p, 4, "(BP)") != 0)
        return "memory off the stack: " + i->text;
  }
  return "";
}

TEST(JumpSite, AgreesWithGoObjdumpOnEveryFunction) {
  const auto fixtures = all_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no Go fixtures built in " << testing::fixtures_dir();
  int files = 0;
  // Over every fixture: sites, and those a jump can take.
  int entries = 0, entries_ok = 0, rets = 0, rets_ok = 0, framed = 0, framed_ok = 0;
  int epilogues_ok = 0, wide_ok = 0, old_ok = 0;
  int checks = 0, checks_ok = 0, check_pcs = 0, check_pcs_unsafe = 0, branches_ok = 0,
      shorts_ok = 0;
  std::map<std::string, int> refusals;        // after a stack check, by reason
  std::map<std::string, int> check_refusals;  // at the stack check, by reason
  for (const auto& fx : fixtures) {
    const std::string od = fx.path + ".objdump";
    if (!file_exists(od) || !file_exists(fx.path + ".gosym.json")) continue;
    SCOPED_TRACE(fx.label());
    ++files;
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok()) << elf.error().what();
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    const Pclntab& pcln = (*bin)->pclntab();
    const auto gosym = nlohmann::json::parse(read_file(fx.path + ".gosym.json"));
    std::map<uint64_t, uint64_t> end_of;
    for (const auto& f : gosym["funcs"])
      end_of[std::stoull(f["entry"].get<std::string>(), nullptr, 16)] =
          std::stoull(f["end"].get<std::string>(), nullptr, 16);
    for (const ObjFunc& f : parse_objdump(read_file(od))) {
      if (f.insns.empty() || f.undecoded) continue;
      const uint64_t entry = f.insns.front().addr;
      const auto e = end_of.find(entry);
      ASSERT_NE(e, end_of.end());
      std::set<uint64_t> targets;
      for (const ObjInsn& i : f.insns) {
        // "JMP 0x4ecc80", "JBE 0x4ecd1f": a direct branch inside the function.
        const auto sp = i.text.find(" 0x");
        if (i.text[0] == 'J' && sp != std::string::npos &&
            i.text.find(' ', sp + 1) == std::string::npos)
          targets.insert(std::stoull(i.text.substr(sp + 1), nullptr, 16));
      }
      const Bytes code = (*elf)->read(entry, e->second - entry);
      ASSERT_FALSE(code.empty());
      const CodeBlocks blocks = decode_blocks(code, entry, false);
      const FuncCode fc = analyze_function(code, entry, blocks);
      // The function's first instruction, Go 1.21+'s `push rbp`, and before 1.21 the
      // instruction after the stack check (`sub rsp, N; mov [rsp+N-8], rbp; ...`).
      std::vector<uint64_t> sites = {entry};
      if (fc.push_rbp && *fc.push_rbp != entry) sites.push_back(*fc.push_rbp);
      if (fc.stack_check_jcc && !fc.push_rbp) {
        const int64_t k = blocks.index_of(*fc.stack_check_jcc);
        if (k >= 0 && k + 1 < int64_t(blocks.insns.size())) sites.push_back(blocks.insns[k + 1].pc);
      }
      for (uint64_t site : sites) {
        const JumpSite s = entry_jump_site(code, entry, blocks, site);
        const bool after_check = site != entry;
        ++entries;
        if (after_check) ++framed;
        if (!s.ok()) {
          if (after_check) ++refusals[s.refused];
          continue;
        }
        ++entries_ok;
        if (after_check) ++framed_ok;
        EXPECT_GE(s.len, kJumpLen);
        EXPECT_EQ(objdump_refuses(f, targets, s, false), "")
            << std::hex << "entry site 0x" << site << " len " << std::dec << int(s.len);
      }
      if (fc.stack_check && fc.stack_check_jcc) {
        const JumpSite s =
            stack_check_jump_site(code, entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
        ++checks;
        if (s.ok()) {
          ++checks_ok;
          // The same range as objdump's, whose one branch is the check's own jbe, and whose
          // one access off the stack is its load of g.stackguard (R14).
          JumpSite before_jbe = s;
          before_jbe.len = static_cast<uint8_t>(s.len - s.branch_len);
          EXPECT_EQ(objdump_refuses(f, targets, before_jbe, false, /*g_load=*/true), "")
              << std::hex << "stack check at 0x" << entry;
          const auto jbe = std::find_if(f.insns.begin(), f.insns.end(), [&](const ObjInsn& i) {
            return i.addr == s.at + before_jbe.len;
          });
          ASSERT_NE(jbe, f.insns.end());
          EXPECT_EQ(jbe->len, s.branch_len);
          EXPECT_TRUE(jbe->text.rfind("JBE ", 0) == 0) << jbe->text;
          EXPECT_NE(jbe->text.find(fmt::format("{:#x}", s.branch_to)), std::string::npos)
              << jbe->text;
          // What makes this site safe to patch: the compiler's own table marks every pc a
          // preempted goroutine could resume at inside it (past its first instruction: the
          // jbe) unsafe for async preemption (PCDATA_UnsafePoint, table 0: -2). A larger
          // frame's lea before the compare is not marked: the range once began with it.
          EXPECT_EQ(s.at, *fc.stack_check);
          const PclnFunc* pf = pcln.find(entry);
          ASSERT_NE(pf, nullptr);
          for (const ObjInsn& i : f.insns) {
            if (i.addr <= s.at || i.addr >= s.at + s.len) continue;
            ++check_pcs;
            const auto up = pcln.pcvalue(pcln.pcdata(*pf, 0), pf->entry, i.addr);
            if (up == std::optional<int32_t>(-2))
              ++check_pcs_unsafe;
            else
              ADD_FAILURE() << std::hex << "0x" << i.addr << " in the stack check of 0x" << entry
                            << " is not marked unsafe: " << std::dec << up.value_or(9999);
          }
          // The jbe alone (the trampoline backend's site): objdump's 6-byte JBE, where the
          // range ends, and so no pc inside it but its own.
          const JumpSite b =
              stack_check_branch_site(code, entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
          EXPECT_EQ(b.ok(), s.branch_len == 6) << std::hex << "0x" << entry << ": " << b.refused;
          if (b.ok()) {
            ++branches_ok;
            EXPECT_EQ(b.at + b.len, s.at + s.len);
            EXPECT_EQ(b.len, 6);
            EXPECT_EQ(b.branch_to, s.branch_to);
          }
          // Otherwise a short check, whose jump ends on objdump's 2-byte JBE (0x76).
          const JumpSite c =
              stack_check_short_site(code, entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
          EXPECT_NE(b.ok(), c.ok()) << std::hex << "0x" << entry << ": " << c.refused;
          if (c.ok()) {
            ++shorts_ok;
            EXPECT_EQ(c.at + kJumpLen - 1, *fc.stack_check_jcc);
            EXPECT_EQ(code[*fc.stack_check_jcc - entry], kShortJbe);
          }
        } else {
          ++check_refusals[s.refused];
        }
      }
      for (uint64_t r : fc.rets) {
        const JumpSite s = ret_jump_site(code, entry, blocks, r);
        ++rets;
        if (!s.ok()) continue;
        ++rets_ok;
        EXPECT_EQ(s.at + s.len, r + 1) << "ends with the RET";
        EXPECT_EQ(objdump_refuses(f, targets, s, true), "")
            << std::hex << "RET site 0x" << r << " from 0x" << s.at;
      }
      // A timed run's RET site: objdump's `ADDQ $N, SP` (4 bytes, N under 128; or 7 bytes,
      // N of 128 or more: a wide epilogue; or `SUBQ $-0x80, SP`, N 128 in 4 bytes), `POPQ BP`,
      // `RET`, each where the site says; the add's pc is the one whose byte changes. Before Go
      // 1.21, `MOVQ D(SP), BP`, `ADDQ $N, SP`, `RET`, the mov's byte changing.
      for (uint64_t r : fc.rets) {
        const JumpSite e = ret_epilogue_site(code, entry, blocks, r);
        if (!e.ok()) continue;
        ++epilogues_ok;
        auto at = [&](uint64_t pc) {
          return std::find_if(f.insns.begin(), f.insns.end(),
                              [&](const ObjInsn& i) { return i.addr == pc; });
        };
        const auto first = at(e.at);
        ASSERT_NE(first, f.insns.end()) << std::hex << "0x" << e.at;
        if (first->text.rfind("MOVQ ", 0) == 0) {
          // Go before 1.21: MOVQ D(SP), BP; ADDQ $N, SP; RET, each where the site says.
          ++old_ok;
          EXPECT_TRUE(first->text.ends_with("(SP), BP")) << first->text;
          EXPECT_TRUE(first->len == 4 || first->len == 5 || first->len == 8) << first->text;
          const auto add = at(e.at + first->len);
          ASSERT_NE(add, f.insns.end());
          EXPECT_TRUE(add->text.rfind("ADDQ $0x", 0) == 0 && add->text.ends_with(", SP"))
              << add->text;
          const auto ret = at(e.at + first->len + add->len);
          ASSERT_NE(ret, f.insns.end());
          EXPECT_EQ(ret->text, "RET");
          EXPECT_EQ(r, e.at + e.len - 1);
          continue;
        }
        const bool wide = e.len >= 9;
        wide_ok += wide;
        const uint64_t add_len = wide ? 7 : 4;
        const auto add = first, pop = at(e.at + add_len), ret = at(e.at + e.len - 1);
        ASSERT_NE(pop, f.insns.end());
        ASSERT_NE(ret, f.insns.end());
        if (e.len == add_len + 3) {
          EXPECT_EQ(at(e.at + add_len + 1)->text, "NOPL");
        }
        EXPECT_EQ(add->len, add_len) << add->text;
        if (add->text == "SUBQ $-0x80, SP") {
          EXPECT_FALSE(wide);
        } else {
          ASSERT_TRUE(add->text.rfind("ADDQ $0x", 0) == 0 && add->text.ends_with(", SP"))
              << add->text;
          const unsigned long n = std::stoul(add->text.substr(8), nullptr, 16);
          EXPECT_EQ(n >= 128, wide) << add->text;
        }
        EXPECT_EQ(pop->text, "POPQ BP");
        EXPECT_EQ(ret->text, "RET");
        EXPECT_EQ(r, e.at + e.len - 1);
      }
    }
  }
  if (files == 0) GTEST_SKIP() << "no fixture has its objdump listing";
  // Not a refusal of everything: the prologue after a stack check (`push rbp; mov rbp,rsp;
  // sub rsp,N`, or before Go 1.21 `sub rsp,N; mov [rsp+N-8],rbp`) nearly always makes room,
  // and most epilogues have 5 bytes or more before their RET. A frameless leaf often has
  // neither (`lea rax,[rip+X]; ret`).
  std::cerr << "entry sites " << entries_ok << "/" << entries << ", after a stack check "
            << framed_ok << "/" << framed << ", RET sites " << rets_ok << "/" << rets << "\n";
  for (const auto& [why, n] : refusals)
    std::cerr << "  after a stack check, " << why << ": " << n << "\n";
  std::cerr << "stack checks " << checks_ok << "/" << checks << ", their inner pcs marked unsafe "
            << check_pcs_unsafe << "/" << check_pcs << ", with a 6-byte jbe " << branches_ok
            << ", short " << shorts_ok << "\n";
  std::cerr << "RET epilogues a timed run patches " << epilogues_ok << "/" << rets << " ("
            << wide_ok << " wide, " << old_ok << " before Go 1.21)\n";
  for (const auto& [why, n] : check_refusals)
    std::cerr << "  at a stack check, " << why << ": " << n << "\n";
  EXPECT_GE(framed_ok, framed * 9 / 10);
  EXPECT_GE(checks_ok, checks * 9 / 10);
  EXPECT_GE(rets_ok, rets * 3 / 4);
  EXPECT_GT(epilogues_ok, 0);
  EXPECT_GT(wide_ok, 0);
  EXPECT_GT(old_ok, 0);
}

}  // namespace
}  // namespace gotap
