#include "backends/ptrace/breakpoints.h"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>

#include <Zydis/Zydis.h>

#include "backends/ptrace/scratch_room.h"
#include "backends/ptrace/site_bytes.h"
#include "backends/ptrace/trap_net.h"
#include "core/plan/zydis_decoder.h"
#include "core/sys/proc_maps.h"

namespace gotap::ptrace {

namespace {

constexpr uint64_t kSlotSize = Breakpoints::kSlotSize;
constexpr uint64_t kPage = 4096;

Result<void> classify(Site& s) {
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(zydis_decoder(), s.orig, sizeof s.orig, &in, ops)))
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

void Breakpoints::reserve(size_t n) {
  sites_.reserve(n);
  added_roles_.reserve(n);
  rebuild_index(n);
}

void Breakpoints::rebuild_index(size_t min_sites) {
  min_sites = std::max(min_sites, sites_.size());
  size_t size = 16;
  unsigned bits = 4;
  while (size * 7 < min_sites * 10) {
    size *= 2;
    ++bits;
  }
  if (size != index_.size())
    index_.assign(size, kNone);
  else
    std::fill(index_.begin(), index_.end(), kNone);
  shift_ = 64 - bits;
  for (uint32_t i = 0; i < sites_.size(); ++i) {
    size_t h = hash(sites_[i].addr);
    while (index_[h] != kNone) h = (h + 1) & (size - 1);
    index_[h] = i;
  }
}

Result<Site*> Breakpoints::add(uint64_t addr, SiteRole role, int32_t sp_delta, MemoryReader& mem) {
  if (finished_) return make_error("a probe site added after the scratch pages were built");
  if (Site* s = find(addr)) {
    added_roles_.push_back({uint32_t(s - sites_.data()), role});
    return s;
  }
  Site s;
  s.addr = addr;
  s.sp_delta = sp_delta;
  // The instruction may end near the end of a mapping: read what is there.
  size_t n = sizeof s.orig;
  while (n > 0 && !mem.read(addr, s.orig, n)) --n;
  if (n == 0) return runtime_error("cannot read the code at {:#x}", addr);
  GOTAP_TRY(classify(s));
  if ((sites_.size() + 1) * 10 > index_.size() * 7) rebuild_index(2 * (sites_.size() + 1));
  const uint32_t i = uint32_t(sites_.size());
  sites_.push_back(s);
  size_t h = hash(addr);
  while (index_[h] != kNone) h = (h + 1) & (index_.size() - 1);
  index_[h] = i;
  added_roles_.push_back({i, role});
  return &sites_.back();
}

void Breakpoints::finish() {
  if (finished_) return;
  finished_ = true;
  // Every role, grouped by site in the order added (a counting sort: stable).
  std::vector<uint32_t> first(sites_.size() + 1, 0);
  for (const auto& [i, r] : added_roles_) ++first[i + 1];
  for (size_t i = 1; i < first.size(); ++i) first[i] += first[i - 1];
  roles_.resize(added_roles_.size());
  {
    std::vector<uint32_t> at(first.begin(), first.end() - 1);
    for (const auto& [i, r] : added_roles_) roles_[at[i]++] = r;
  }
  for (size_t i = 0; i < sites_.size(); ++i)
    sites_[i].roles = std::span<SiteRole>(roles_.data() + first[i], first[i + 1] - first[i]);
  std::vector<std::pair<uint32_t, SiteRole>>().swap(added_roles_);
  // In address order: the safety net's table is, and so are the int3 writes.
  std::sort(sites_.begin(), sites_.end(),
            [](const Site& a, const Site& b) { return a.addr < b.addr; });
  rebuild_index(sites_.size());
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

namespace {

// Hands the scratch page's bytes to `put` in parts of at most kPart bytes, in address order;
// the gaps between what is written are int3s.
class ScratchWriter {
 public:
  explicit ScratchWriter(const Breakpoints::ScratchPut& put) : put_(put) { buf_.reserve(kPart); }
  // Bytes at `off`, at or after the end of what was written.
  bool at(uint64_t off, const void* p, size_t n) {
    if (!fill_to(off)) return false;
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
    return buf_.size() < kPart || flush();
  }
  bool fill_to(uint64_t off) {
    while (start_ + buf_.size() < off) {
      const size_t n = std::min<uint64_t>(off - (start_ + buf_.size()), kPart - buf_.size());
      buf_.insert(buf_.end(), n, 0xCC);
      if (buf_.size() >= kPart && !flush()) return false;
    }
    return true;
  }
  bool flush() {
    if (buf_.empty()) return true;
    if (!put_(start_, buf_)) return false;
    start_ += buf_.size();
    buf_.clear();
    return true;
  }

 private:
  static constexpr size_t kPart = 256 * 1024;
  const Breakpoints::ScratchPut& put_;
  std::vector<uint8_t> buf_;
  uint64_t start_ = 0;  // the offset of buf_[0]
};

}  // namespace

Result<void> Breakpoints::write_scratch(uint64_t base, const ScratchPut& put) {
  finish();
  auto code = net_handler_code();
  if (code.size() > kNetHeaderOff) return make_error("the trap handler does not fit its page");
  const size_t n = sites_.size();
  const uint64_t size = scratch_size_for(n);
  const uint64_t slots_off = slots_offset(n);
  // Every copy's rebased displacement first: a page half written would be a table with no
  // copies behind it.
  auto rebased = [&](const Site& s, uint64_t slot) -> std::optional<int32_t> {
    int32_t disp;
    std::memcpy(&disp, s.orig + s.disp_off, 4);
    const int64_t target = static_cast<int64_t>(s.addr + s.len) + disp;
    const int64_t nd = target - static_cast<int64_t>(slot + s.len);
    if (nd != static_cast<int32_t>(nd)) return std::nullopt;
    return static_cast<int32_t>(nd);
  };
  for (size_t i = 0; i < n; ++i) {
    const Site& s = sites_[i];
    if (s.disp_off >= 0 && !rebased(s, base + slots_off + i * kSlotSize))
      return runtime_error("scratch page out of reach of {:#x}", s.addr);
  }
  slots_ = base + slots_off;
  ScratchWriter w(put);
  NetHeader hdr;
  hdr.end = base + size;
  hdr.nsites = n;
  bool ok = w.at(0, code.data(), code.size()) && w.at(kNetHeaderOff, &hdr, sizeof hdr);
  for (size_t i = 0; ok && i < n; ++i) {
    NetEntry e{sites_[i].addr, slot(sites_[i])};
    ok = w.at(kNetTableOff + i * sizeof(NetEntry), &e, sizeof e);
  }
  for (size_t i = 0; ok && i < n; ++i)
    ok = w.at(kNetTableOff + n * sizeof(NetEntry) + i, &sites_[i].orig[0], 1);
  for (size_t i = 0; ok && i < n; ++i) {
    const Site& s = sites_[i];
    uint8_t buf[kSlotSize];
    std::memset(buf, 0xCC, sizeof buf);
    uint8_t* p = buf;
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
          const int32_t nd32 = *rebased(s, slot(s));
          std::memcpy(p + s.disp_off, &nd32, 4);
        }
        put_jmp_abs(p + s.len, next);
        break;
      }
    }
    ok = w.at(slots_off + i * kSlotSize, buf, sizeof buf);
  }
  ok = ok && w.fill_to(size) && w.flush();
  if (!ok) return runtime_error("cannot write the scratch page at {:#x}", base);
  return {};
}

Result<std::vector<uint8_t>> Breakpoints::build_scratch(uint64_t base) {
  std::vector<uint8_t> img;
  GOTAP_TRY(write_scratch(base, [&](uint64_t off, std::span<const uint8_t> b) {
    img.resize(off);
    img.insert(img.end(), b.begin(), b.end());
    return true;
  }));
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
    if (syscall_failed(*r)) continue;  // taken since the maps were read: the next spot
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
  TraceeMemory& mem = proc.mem();
  return write_scratch(got, [&](uint64_t off, std::span<const uint8_t> b) {
    return mem.write(got + off, b.data(), b.size());
  });
}

namespace {

WriteBytes writer_of(TraceeMemory& mem) {
  return [&mem](uint64_t addr, const uint8_t* b, size_t n) { return mem.write(addr, b, n); };
}

}  // namespace

Result<void> Breakpoints::insert_all(TraceeMemory& mem, const FileText& file) {
  SiteWriteStats st;
  const size_t done = write_site_bytes(sites_, true, mem, writer_of(mem), file, &st);
  if (done < sites_.size()) {
    // Only what was written goes back: a site further on may hold another tracer's int3 now.
    for (size_t i = 0; i < done;)
      i += write_site_bytes(std::span<const Site>(sites_).subspan(i, done - i), false, mem,
                            writer_of(mem), file) +
           1;
    for (size_t i = done; i < sites_.size(); ++i) sites_[i].shared = true;
    shared_ = true;
    if (st.changed) {
      changed_at_ = sites_[done].addr;
      return runtime_error(
          "another tracer (a uprobe or a debugger) put an int3 at {:#x} while gotap placed its "
          "probes",
          sites_[done].addr);
    }
    return runtime_error("cannot write a breakpoint at {:#x}", sites_[done].addr);
  }
  inserted_ = true;
  return {};
}

bool Breakpoints::drop_func(int func, TraceeMemory& mem) {
  bool ok = true;
  for (Site& s : sites_) {
    const size_t before = s.roles.size();
    auto end = std::remove_if(s.roles.begin(), s.roles.end(),
                              [func](const SiteRole& r) { return r.func == func; });
    s.roles = s.roles.first(size_t(end - s.roles.begin()));
    if (s.roles.empty() && before != 0 && inserted_ && !s.shared)
      ok = mem.write(s.addr, s.orig, 1) && ok;
  }
  return ok;
}

bool Breakpoints::share(uint64_t addr) {
  Site* s = find(addr);
  if (!s) return false;
  s->shared = true;
  shared_ = true;
  return true;
}

void Breakpoints::restore_all(TraceeMemory& mem, const FileText& file) {
  restore_in(mem, file);
  inserted_ = false;
}

void Breakpoints::restore_in(TraceeMemory& mem, const FileText& file) const {
  std::vector<Site> own;  // only when a uprobe shares a site: the others
  if (shared_)
    std::copy_if(sites_.begin(), sites_.end(), std::back_inserter(own),
                 [](const Site& s) { return !s.shared; });
  const std::span<const Site> sites = shared_ ? std::span<const Site>(own) : sites_;
  // A site that cannot be written back is not the end: every other one still is.
  for (size_t i = 0; i < sites.size();) {
    const auto rest = sites.subspan(i);
    const size_t done = write_site_bytes(rest, false, mem, writer_of(mem), file);
    i += done + 1;
  }
}

std::optional<uint64_t> Breakpoints::text_pc_for(uint64_t pc, MemoryReader& mem) const {
  if (!slots_ || pc < slots_ || pc >= slots_ + sites_.size() * kSlotSize) return std::nullopt;
  const Site& s = sites_[(pc - slots_) / kSlotSize];
  const uint64_t off = (pc - slots_) % kSlotSize;
  const uint64_t next = s.addr + s.len;
  if (off == 0) {
    // A shared site keeps the kernel's int3, and a byte not put back keeps gotap's.
    uint8_t b = 0;
    if (s.shared || !mem.read(s.addr, &b, 1) || b != s.orig[0]) return std::nullopt;
    return s.addr;
  }
  // The offsets of the jumps write_scratch puts after the copy.
  switch (s.step) {
    case StepKind::Jmp:
      return std::nullopt;
    case StepKind::Jcc:
      if (off == 2) return next;
      if (off == 16) return s.target;
      return std::nullopt;
    case StepKind::Call:  // the return address is pushed already
      if (off == 6) return s.target;
      return std::nullopt;
    default:
      if (off == s.len) return next;
      return std::nullopt;
  }
}

bool Breakpoints::step_over(const Site& s, user_regs_struct& r) const {
  const uint64_t to = slot(s);
  if (!to) return false;
  r.rip = to;
  return true;
}

}  // namespace gotap::ptrace
