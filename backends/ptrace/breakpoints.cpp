#include "backends/ptrace/breakpoints.h"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <cstring>

#include <Zydis/Zydis.h>

namespace gotap::ptrace {

namespace {

constexpr uint64_t kSlotSize = 32;
constexpr uint64_t kPage = 4096;

Result<void> classify(Site& s) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, s.orig, sizeof s.orig, &in, ops)))
    return make_error("cannot decode the instruction at {:#x}", s.addr);
  s.len = in.length;
  uint64_t next = s.addr + in.length;
  if (s.orig[0] == 0xCC) return make_error("{:#x} already holds an int3", s.addr);
  if (in.length == 1 && s.orig[0] == 0x55) {
    s.step = StepKind::PushRbp;
    return {};
  }
  switch (in.mnemonic) {
    case ZYDIS_MNEMONIC_RET:
      if (in.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR) break;
      s.step = StepKind::Ret;
      if (in.raw.imm[0].size) s.ret_imm = static_cast<uint16_t>(in.raw.imm[0].value.u);
      return {};
    case ZYDIS_MNEMONIC_NOP:
      s.step = StepKind::Nop;
      return {};
    default:
      break;
  }
  if (in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) {
    if (in.raw.imm[0].is_relative) {
      uint64_t target = next + static_cast<uint64_t>(in.raw.imm[0].value.s);
      if (in.mnemonic == ZYDIS_MNEMONIC_JMP) {
        s.step = StepKind::Jmp;
        s.target = target;
        return {};
      }
      if (in.mnemonic == ZYDIS_MNEMONIC_CALL) {
        s.step = StepKind::Call;
        s.target = target;
        return {};
      }
      if (in.meta.category == ZYDIS_CATEGORY_COND_BR) {
        uint8_t op = in.opcode;
        if (in.opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && op >= 0x70 && op <= 0x7f) {
          s.cc = op - 0x70;
        } else if (in.opcode_map == ZYDIS_OPCODE_MAP_0F && op >= 0x80 && op <= 0x8f) {
          s.cc = op - 0x80;
        } else {
          return make_error("unsupported branch at {:#x}", s.addr);  // jrcxz, loop
        }
        s.step = StepKind::Jcc;
        s.target = target;
        return {};
      }
      return make_error("unsupported relative instruction at {:#x}", s.addr);
    }
    // A RIP-relative memory operand: the copy's displacement is rebased.
    if ((in.attributes & ZYDIS_ATTRIB_HAS_MODRM) && in.raw.modrm.mod == 0 && in.raw.modrm.rm == 5 &&
        in.raw.disp.size == 32)
      s.disp_off = in.raw.disp.offset;
    else
      return make_error("unsupported relative instruction at {:#x}", s.addr);
  }
  s.step = StepKind::OutOfLine;
  return {};
}

}  // namespace

bool condition_holds(uint8_t cc, uint64_t f) {
  bool cf = f & 0x1, pf = f & 0x4, zf = f & 0x40, sf = f & 0x80, of = f & 0x800;
  bool r = false;
  switch (cc >> 1) {
    case 0:
      r = of;
      break;
    case 1:
      r = cf;
      break;
    case 2:
      r = zf;
      break;
    case 3:
      r = cf || zf;
      break;
    case 4:
      r = sf;
      break;
    case 5:
      r = pf;
      break;
    case 6:
      r = sf != of;
      break;
    case 7:
      r = zf || sf != of;
      break;
  }
  return (cc & 1) ? !r : r;
}

Result<Site*> Breakpoints::add(uint64_t addr, SiteRole role, int32_t sp_delta, MemoryReader& mem) {
  auto it = sites_.find(addr);
  if (it != sites_.end()) {
    it->second.roles.push_back(role);
    return &it->second;
  }
  Site s;
  s.addr = addr;
  s.sp_delta = sp_delta;
  // The instruction may end near the end of a mapping: read what is there.
  size_t n = sizeof s.orig;
  while (n > 0 && !mem.read(addr, s.orig, n)) --n;
  if (n == 0) return runtime_error("cannot read the code at {:#x}", addr);
  GOTAP_TRY(classify(s));
  s.roles.push_back(role);
  return &sites_.emplace(addr, s).first->second;
}

Result<void> Breakpoints::place_scratch(Process& proc, pid_t tid, uint64_t syscall_at,
                                        uint64_t near_lo, uint64_t near_hi) {
  std::vector<Site*> ool;
  for (auto& [a, s] : sites_)
    if (s.step == StepKind::OutOfLine) ool.push_back(&s);
  if (ool.empty()) return {};
  uint64_t size = (ool.size() * kSlotSize + kPage - 1) / kPage * kPage;
  // Below the executable: within rel32 reach of its code, away from the heap (brk grows up
  // from the end of the executable) and from Go's arenas (0xc000000000).
  uint64_t base = (near_lo & ~(kPage - 1));
  uint64_t got = 0;
  for (int k = 1; k <= 256 && !got; ++k) {
    uint64_t step = uint64_t(k) * 0x10000;
    if (base < size + step + 0x10000) break;
    uint64_t hint = base - size - step;
    auto r = proc.inject_syscall(
        tid, syscall_at, SYS_mmap,
        {hint, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
         static_cast<uint64_t>(-1), 0});
    if (!r) return r.error();
    int64_t v = static_cast<int64_t>(*r);
    if (v < 0 && v > -4096) continue;
    got = *r;
    int64_t dist = static_cast<int64_t>(near_hi - got);
    if (got != hint && (dist > (1ll << 31) - (1 << 20) || dist < -(1ll << 31))) {
      (void)proc.inject_syscall(tid, syscall_at, SYS_munmap, {got, size});
      got = 0;
    }
  }
  if (!got) return runtime_error("cannot map a scratch page in the tracee near {:#x}", near_lo);
  scratch_ = got;
  scratch_size_ = size;
  uint64_t slot = got;
  for (Site* s : ool) {
    uint8_t code[kSlotSize];
    std::memset(code, 0xCC, sizeof code);
    std::memcpy(code, s->orig, s->len);
    if (s->disp_off >= 0) {
      int32_t disp;
      std::memcpy(&disp, s->orig + s->disp_off, 4);
      int64_t target = static_cast<int64_t>(s->addr + s->len) + disp;
      int64_t nd = target - static_cast<int64_t>(slot + s->len);
      if (nd != static_cast<int32_t>(nd))
        return runtime_error("scratch page out of reach of {:#x}", s->addr);
      int32_t nd32 = static_cast<int32_t>(nd);
      std::memcpy(code + s->disp_off, &nd32, 4);
    }
    // jmp [rip+0]; .quad back
    uint8_t* j = code + s->len;
    j[0] = 0xFF;
    j[1] = 0x25;
    std::memset(j + 2, 0, 4);
    uint64_t back = s->addr + s->len;
    std::memcpy(j + 6, &back, 8);
    if (!proc.mem().write(slot, code, sizeof code))
      return runtime_error("cannot write the scratch page at {:#x}", slot);
    s->slot = slot;
    slot += kSlotSize;
  }
  return {};
}

Result<void> Breakpoints::insert_all(TraceeMemory& mem) {
  static const uint8_t kInt3 = 0xCC;
  for (auto& [a, s] : sites_) {
    if (!mem.write(a, &kInt3, 1)) {
      restore_all(mem);
      return runtime_error("cannot write a breakpoint at {:#x}", a);
    }
  }
  inserted_ = true;
  return {};
}

void Breakpoints::restore_all(TraceeMemory& mem) {
  for (auto& [a, s] : sites_) mem.write(a, s.orig, 1);
  inserted_ = false;
}

bool Breakpoints::step_over(const Site& s, user_regs_struct& r, TraceeMemory& mem) {
  switch (s.step) {
    case StepKind::PushRbp: {
      uint64_t v = r.rbp;
      if (!mem.write_fast(r.rsp - 8, &v, 8)) return false;
      r.rsp -= 8;
      r.rip = s.addr + 1;
      return true;
    }
    case StepKind::Ret: {
      uint64_t ra;
      if (!mem.read(r.rsp, &ra, 8)) return false;
      r.rsp += 8 + s.ret_imm;
      r.rip = ra;
      return true;
    }
    case StepKind::Jcc:
      r.rip = condition_holds(s.cc, r.eflags) ? s.target : s.addr + s.len;
      return true;
    case StepKind::Jmp:
      r.rip = s.target;
      return true;
    case StepKind::Call: {
      uint64_t ra = s.addr + s.len;
      if (!mem.write_fast(r.rsp - 8, &ra, 8)) return false;
      r.rsp -= 8;
      r.rip = s.target;
      return true;
    }
    case StepKind::Nop:
      r.rip = s.addr + s.len;
      return true;
    case StepKind::OutOfLine:
      if (!s.slot) return false;
      r.rip = s.slot;
      return true;
  }
  return false;
}

}  // namespace gotap::ptrace
