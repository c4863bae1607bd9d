#include "backends/ptrace/breakpoints.h"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstring>

#include <Zydis/Zydis.h>

#include "backends/ptrace/scratch_room.h"
#include "backends/ptrace/trap_net.h"
#include "core/sys/proc_maps.h"

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

namespace {

// jmp qword [rip+0]; .quad to: 14 bytes, reaches anywhere.
uint8_t* put_jmp_abs(uint8_t* p, uint64_t to) {
  p[0] = 0xFF;
  p[1] = 0x25;
  std::memset(p + 2, 0, 4);
  std::memcpy(p + 6, &to, 8);
  return p + 14;
}

// Where the slots start: after the table and the original bytes.
uint64_t slots_offset(size_t nsites) {
  return (kNetTableOff + nsites * (sizeof(NetEntry) + 1) + kSlotSize - 1) / kSlotSize * kSlotSize;
}

}  // namespace

uint64_t Breakpoints::scratch_size_for(size_t nsites) {
  uint64_t slots = slots_offset(nsites);
  return (slots + nsites * kSlotSize + kPage - 1) / kPage * kPage;
}

Result<std::vector<uint8_t>> Breakpoints::build_scratch(uint64_t base) {
  auto code = net_handler_code();
  if (code.size() > kNetHeaderOff) return make_error("the trap handler does not fit its page");
  const uint64_t size = scratch_size_for(sites_.size());
  std::vector<uint8_t> img(size, 0xCC);
  std::memcpy(img.data(), code.data(), code.size());
  std::vector<Site*> order;
  for (auto& [a, s] : sites_) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](Site* a, Site* b) { return a->addr < b->addr; });
  NetHeader hdr;
  hdr.end = base + size;
  hdr.nsites = order.size();
  std::memcpy(img.data() + kNetHeaderOff, &hdr, sizeof hdr);
  uint64_t off = slots_offset(order.size());
  for (size_t i = 0; i < order.size(); ++i, off += kSlotSize) {
    Site& s = *order[i];
    s.slot = base + off;
    uint8_t* p = img.data() + off;
    const uint64_t next = s.addr + s.len;
    switch (s.step) {
      case StepKind::Jmp:
        put_jmp_abs(p, s.target);
        break;
      case StepKind::Jcc:  // j<cc> +14 over the fall-through jump to the taken one
        p[0] = static_cast<uint8_t>(0x70 | s.cc);
        p[1] = 14;
        put_jmp_abs(put_jmp_abs(p + 2, next), s.target);
        break;
      case StepKind::Call: {  // push qword [rip+14] (the return address); jmp target
        static const uint8_t kPushRip14[6] = {0xFF, 0x35, 14, 0, 0, 0};
        std::memcpy(p, kPushRip14, 6);
        std::memcpy(put_jmp_abs(p + 6, s.target), &next, 8);
        break;
      }
      default: {  // the instruction itself, then back to the one after it
        std::memcpy(p, s.orig, s.len);
        if (s.disp_off >= 0) {
          int32_t disp;
          std::memcpy(&disp, s.orig + s.disp_off, 4);
          int64_t target = static_cast<int64_t>(next) + disp;
          int64_t nd = target - static_cast<int64_t>(s.slot + s.len);
          if (nd != static_cast<int32_t>(nd))
            return runtime_error("scratch page out of reach of {:#x}", s.addr);
          int32_t nd32 = static_cast<int32_t>(nd);
          std::memcpy(p + s.disp_off, &nd32, 4);
        }
        put_jmp_abs(p + s.len, next);
        break;
      }
    }
    NetEntry e{s.addr, s.slot};
    std::memcpy(img.data() + kNetTableOff + i * sizeof(NetEntry), &e, sizeof e);
    img[kNetTableOff + order.size() * sizeof(NetEntry) + i] = s.orig[0];
  }
  return img;
}

Result<void> Breakpoints::place_scratch(Process& proc, pid_t tid, uint64_t syscall_at,
                                        uint64_t image_lo, uint64_t image_hi) {
  if (sites_.empty()) return {};
  uint64_t size = scratch_size_for(sites_.size());
  const ScratchRoom room = ScratchRoom::of(proc.pid(), image_lo, image_hi);
  uint64_t got = 0;
  for (uint64_t hint : scratch_spots(sys::read_maps(proc.pid()), room, size)) {
    auto r = proc.inject_syscall(
        tid, syscall_at, SYS_mmap,
        {hint, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
         static_cast<uint64_t>(-1), 0});
    if (!r) return r.error();
    int64_t v = static_cast<int64_t>(*r);
    if (v < 0 && v > -4096) continue;  // taken since the maps were read: the next spot
    got = *r;
    // A kernel before 4.17 takes MAP_FIXED_NOREPLACE's address as a mere hint.
    if (got == hint || scratch_within_reach(got, size, room)) break;
    (void)proc.inject_syscall(tid, syscall_at, SYS_munmap, {got, size});
    got = 0;
  }
  if (!got)
    return runtime_error(
        "cannot map {} KiB of scratch pages in the tracee within 2 GiB of its image [{:#x}, "
        "{:#x})",
        size / 1024, image_lo, image_hi);
  scratch_ = got;
  scratch_size_ = size;
  auto img = build_scratch(got);
  if (!img) return img.error();
  if (!proc.mem().write(got, img->data(), img->size()))
    return runtime_error("cannot write the scratch page at {:#x}", got);
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

bool Breakpoints::drop_func(int func, TraceeMemory& mem) {
  bool ok = true;
  for (auto& [a, s] : sites_) {
    const size_t before = s.roles.size();
    std::erase_if(s.roles, [func](const SiteRole& r) { return r.func == func; });
    if (s.roles.empty() && before != 0 && inserted_) ok = mem.write(a, s.orig, 1) && ok;
  }
  return ok;
}

void Breakpoints::restore_all(TraceeMemory& mem) {
  for (auto& [a, s] : sites_) mem.write(a, s.orig, 1);
  inserted_ = false;
}

bool Breakpoints::step_over(const Site& s, user_regs_struct& r) {
  if (!s.slot) return false;
  r.rip = s.slot;
  return true;
}

}  // namespace gotap::ptrace
