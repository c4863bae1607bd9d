#include "backends/trampoline/record_condition.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/plan/event_ring.h"

namespace gotap::trampoline {

namespace {

// Where the record's stack slots are placed for the condition's reads: no process address is
// this high, so that only the slots the record holds are read there.
constexpr uint64_t kStackBase = 1ull << 63;

uint64_t word_at(const uint8_t* record, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, record + kTraceWords + 8 * i, 8);
  return v;
}

// The process's memory as far as one record shows it, at the addresses it was read from:
// its stack slots, the fields it read through pointers, its copies. Nothing else is read (the
// capture holds all that the condition reads; a read it does not hold is a failed read).
class RecordMemory : public MemoryReader {
 public:
  RecordMemory(const uint8_t* record, const RecordCapture& cap) {
    for (size_t i = 0; i < cap.words.size(); ++i) {
      const CaptureWord& w = cap.words[i];
      if (w.src == CaptureWord::Stack) {
        stack_[w.off] = word_at(record, i);
      } else if (w.src == CaptureWord::Deref && w.base < i) {
        const uint64_t base = word_at(record, w.base);
        if (deref_read(base))
          fields_.push_back({base + int64_t(w.off), w.size, word_at(record, i)});
      }
    }
    for (size_t i = 0; i < cap.copies.size(); ++i) {
      const CaptureCopy& c = cap.copies[i];
      uint16_t len = 0;
      std::memcpy(&len, record + kTraceCopyLen + 2 * i, 2);
      // A stack walk's bytes are return addresses, not memory at any word's address.
      if (c.kind == CaptureCopy::None || c.kind == CaptureCopy::Stack || len > cap.copy_room(i) ||
          c.word >= cap.words.size())
        continue;
      // An itab's copy is its type word, at itab + 8.
      const uint64_t at = word_at(record, c.word) + (c.kind == CaptureCopy::Itab ? 8 : 0);
      copies_.push_back({at, record + cap.copy_at(i), len});
    }
  }

  bool read(uint64_t addr, void* buf, size_t n) override {
    if (addr >= kStackBase - (1ull << 31) && addr < kStackBase + (1ull << 31)) {
      auto it = stack_.find(static_cast<int32_t>(int64_t(addr - kStackBase)));
      if (n > 8 || it == stack_.end()) return false;
      std::memcpy(buf, &it->second, n);
      return true;
    }
    for (const Field& f : fields_)
      if (f.at == addr && n <= f.size) {
        std::memcpy(buf, &f.value, n);
        return true;
      }
    for (const Copy& c : copies_)
      if (addr >= c.at && addr - c.at <= c.len && n <= c.len - (addr - c.at)) {
        std::memcpy(buf, c.bytes + (addr - c.at), n);
        return true;
      }
    return n == 0;
  }

 private:
  struct Field {
    uint64_t at;
    size_t size;
    uint64_t value;
  };
  struct Copy {
    uint64_t at;
    const uint8_t* bytes;
    size_t len;
  };
  std::map<int32_t, uint64_t> stack_;
  std::vector<Field> fields_;
  std::vector<Copy> copies_;
};

bool same_word(const CaptureWord& a, const CaptureWord& b) {
  if (a.src != b.src) return false;
  switch (a.src) {
    case CaptureWord::Reg:
      return a.reg == b.reg;
    case CaptureWord::Stack:
      return a.off == b.off;
    default:
      return a.base == b.base && a.off == b.off && a.size == b.size;
  }
}

}  // namespace

std::string add_condition_capture(const gotap_cond& prog, bool at_ret, RecordCapture& cap) {
  if (!(prog.flags & GOTAP_COND_ON) || (prog.flags & GOTAP_COND_NEVER)) return "";
  const unsigned begin = at_ret ? prog.n_entry : 0;
  const unsigned end =
      std::min<unsigned>(begin + (at_ret ? prog.n_ret : prog.n_entry), GOTAP_COND_MAX_INSNS);
  // The program's stack, as the words its values come from (-1: a value no word holds).
  std::vector<int> st;
  auto pop = [&st] {
    if (st.empty()) return -1;
    const int v = st.back();
    st.pop_back();
    return v;
  };
  auto word = [&cap](const CaptureWord& w) {
    for (size_t i = 0; i < cap.words.size(); ++i)
      if (same_word(cap.words[i], w)) return int(i);
    cap.words.push_back(w);
    return int(cap.words.size() - 1);
  };
  std::vector<std::pair<size_t, uint16_t>> needs;  // (copy, bytes it must hold)
  auto copy = [&cap, &needs](CaptureCopy::Kind kind, int data, int len, uint16_t need) {
    size_t i = 0;
    for (; i < cap.copies.size(); ++i) {
      const CaptureCopy& c = cap.copies[i];
      if (c.kind == kind && c.word == data && (kind == CaptureCopy::Itab || c.aux == len) &&
          (kind == CaptureCopy::Itab || c.max >= need))
        break;
    }
    if (i == cap.copies.size()) {
      CaptureCopy c;
      c.kind = kind;
      c.word = static_cast<uint8_t>(data);
      c.aux = static_cast<uint8_t>(len < 0 ? 0 : len);
      c.max = kind == CaptureCopy::Itab ? 0 : need;
      cap.copies.push_back(c);
    }
    needs.emplace_back(i, kind == CaptureCopy::Itab ? 8 : need);
  };
  for (unsigned k = begin; k < end; ++k) {
    const gotap_cond_insn& in = prog.insns[k];
    switch (in.op) {
      case GOTAP_COP_REG:
        if (in.a < kNumValueRegs) {
          CaptureWord w;
          w.reg = in.a;
          st.push_back(word(w));
        } else {
          st.push_back(-1);
        }
        break;
      case GOTAP_COP_STACK: {
        CaptureWord w;
        w.src = CaptureWord::Stack;
        w.off = in.off;
        st.push_back(word(w));
        break;
      }
      case GOTAP_COP_DEREF: {
        const int base = pop();
        const unsigned size = std::min<unsigned>(in.b, 8);
        if (base < 0) return "follows an address it computes (an element by index)";
        if (size != 1 && size != 2 && size != 4 && size != 8)
          return fmt::format("reads a {}-byte field", size);
        CaptureWord w;
        w.src = CaptureWord::Deref;
        w.base = static_cast<uint8_t>(base);
        w.off = in.off;
        w.size = static_cast<uint8_t>(size);
        st.push_back(word(w));
        break;
      }
      case GOTAP_COP_STR: {
        const int len = pop(), data = pop();
        if (len < 0 || data < 0) return "compares a string it computes";
        copy(CaptureCopy::String, data, len,
             in.a == GOTAP_CS_CONTAINS ? GOTAP_COND_HAYSTACK
                                       : std::min<uint16_t>(in.b, GOTAP_COND_MAX_LIT));
        st.push_back(-1);
        break;
      }
      case GOTAP_COP_STR2: {
        const int l2 = pop(), d2 = pop(), l1 = pop(), d1 = pop();
        if (l1 < 0 || d1 < 0 || l2 < 0 || d2 < 0) return "compares a string it computes";
        copy(CaptureCopy::String, d1, l1, GOTAP_COND_STR2_MAX);
        copy(CaptureCopy::String, d2, l2, GOTAP_COND_STR2_MAX);
        st.push_back(-1);
        break;
      }
      case GOTAP_COP_ITAB_TYPE: {
        const int itab = pop();
        if (itab < 0) return "reads the type of an interface it computes";
        copy(CaptureCopy::Itab, itab, -1, 8);
        st.push_back(-1);
        break;
      }
      case GOTAP_COP_CMP:
      case GOTAP_COP_AND:
      case GOTAP_COP_OR:
        pop();
        pop();
        st.push_back(-1);
        break;
      case GOTAP_COP_SETBIT:
      case GOTAP_COP_SAVE:
        pop();
        break;
      case GOTAP_COP_INDEX:
        pop();
        pop();
        pop();
        st.push_back(-1);
        break;
      case GOTAP_COP_MAP_INDEX:
        pop();
        pop();
        st.push_back(-1);
        break;
      case GOTAP_COP_EXT:
      case GOTAP_COP_NOT:
      case GOTAP_COP_NOP:
        break;
      default:  // CONST, XMM, GOID, DURATION, BIT, LOAD: no word of the record
        st.push_back(-1);
        break;
    }
  }
  if (cap.words.size() > kTraceMaxWords)
    return fmt::format("reads {} words at a site, past the {} a record holds", cap.words.size(),
                       kTraceMaxWords);
  if (cap.copies.size() > kTraceMaxCopies)
    return fmt::format("copies {} strings at a site, past the {} a record holds", cap.copies.size(),
                       kTraceMaxCopies);
  for (const auto& [i, need] : needs)
    if (cap.copy_room(i) < need)
      return fmt::format("compares more bytes of strings than a record of {} bytes holds",
                         kTraceRing.record_size());
  return "";
}

bool RecordCondition::on(size_t func) const {
  return func < cond_.funcs.size() && (cond_.funcs[func].prog.flags & GOTAP_COND_ON);
}

bool RecordCondition::run(size_t func, bool at_ret, const uint8_t* record, const RecordCapture& cap,
                          int64_t goid, uint64_t duration_ns, uint64_t& bits,
                          uint64_t (&vals)[GOTAP_COND_VALS]) {
  if (!on(func)) return true;
  RegState regs;
  regs.sp = kStackBase;
  for (size_t i = 0; i < cap.words.size(); ++i)
    if (cap.words[i].src == CaptureWord::Reg && cap.words[i].reg < kNumValueRegs)
      regs.gp[cap.words[i].reg] = word_at(record, i);
  RecordMemory mem(record, cap);
  // Without a goid (none read) the condition's goid is 0, as on the other backends.
  cond::EvalEnv env{&regs, &mem, goid < 0 ? 0 : goid, duration_ns, bias_, bits, nullptr};
  std::copy(std::begin(vals), std::end(vals), env.vals);
  const bool verdict = cond::run(cond_.funcs[func].prog, at_ret, env);
  bits = env.bits;
  std::copy(std::begin(env.vals), std::end(env.vals), vals);
  return verdict;
}

}  // namespace gotap::trampoline
