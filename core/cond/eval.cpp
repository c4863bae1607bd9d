#include "core/cond/eval.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

namespace gotap::cond {

namespace {

uint64_t ext(uint64_t v, unsigned size, bool sign) {
  if (size == 0 || size >= 8) return v;
  const unsigned bits = size * 8;
  v &= (1ull << bits) - 1;
  if (sign && (v >> (bits - 1)) & 1) v |= ~((1ull << bits) - 1);
  return v;
}

template <typename T>
bool ordered(uint8_t op, T x, T y) {
  return gotap_cond_decide(op, x<y, x == y, x> y);
}

bool compare(uint8_t op, uint8_t num, uint64_t x, uint64_t y) {
  switch (num) {
    case GOTAP_CN_SIGNED:
    case GOTAP_CN_UNSIGNED:
      return gotap_cond_cmp_int(op, num, x, y);
    case GOTAP_CN_F64: {
      double a, b;
      std::memcpy(&a, &x, 8);
      std::memcpy(&b, &y, 8);
      return ordered(op, a, b);
    }
    default: {
      float a, b;
      uint32_t xa = static_cast<uint32_t>(x), yb = static_cast<uint32_t>(y);
      std::memcpy(&a, &xa, 4);
      std::memcpy(&b, &yb, 4);
      return ordered(op, a, b);
    }
  }
}

// a == b of two strings of length len: 1, 0, or -1 when unknown (as bpf/cond_vm.h decides).
int equal_strings(MemoryReader& mem, uint64_t p1, uint64_t p2, uint64_t len) {
  if (len > GOTAP_COND_STR2_MAX) return -1;
  char a[GOTAP_COND_STR2_MAX], b[GOTAP_COND_STR2_MAX];
  if (len == 0) return 1;
  if (!mem.read(p1, a, len) || !mem.read(p2, b, len)) return -1;
  return std::memcmp(a, b, len) == 0;
}

}  // namespace

bool run(const gotap_cond& p, bool at_ret, EvalEnv& env) {
  if (!(p.flags & GOTAP_COND_ON)) return true;
  if (p.flags & GOTAP_COND_NEVER) return false;
  uint64_t st[GOTAP_COND_STACK] = {};
  bool ok[GOTAP_COND_STACK] = {};
  int top = 0;  // number of words on the stack
  auto push = [&](uint64_t v, bool valid) {
    if (top < GOTAP_COND_STACK) {
      st[top] = v;
      ok[top] = valid;
      ++top;
    }
  };
  auto pop = [&](uint64_t* v) {
    if (top == 0) {
      *v = 0;
      return false;
    }
    --top;
    *v = st[top];
    return ok[top];
  };
  const unsigned begin = at_ret ? p.n_entry : 0;
  const unsigned end =
      std::min<unsigned>(begin + (at_ret ? p.n_ret : p.n_entry), GOTAP_COND_MAX_INSNS);
  for (unsigned i = begin; i < end; ++i) {
    const gotap_cond_insn& in = p.insns[i];
    uint64_t x = 0, y = 0;
    switch (in.op) {
      case GOTAP_COP_CONST:
        push(in.imm + (in.a ? env.bias : 0), true);
        break;
      case GOTAP_COP_REG:
        push(in.a < kNumValueRegs ? env.regs->gp[in.a] : 0, in.a < kNumValueRegs);
        break;
      case GOTAP_COP_STACK: {
        uint64_t v = 0;
        bool r = env.mem->read(env.regs->sp + static_cast<int64_t>(in.off), &v, 8);
        push(v, r);
        break;
      }
      case GOTAP_COP_XMM:
        push(in.a < kNumFloatRegs ? env.regs->xmm[in.a] : 0, in.a < kNumFloatRegs);
        break;
      case GOTAP_COP_GOID:
        push(static_cast<uint64_t>(env.goid), true);
        break;
      case GOTAP_COP_DURATION:
        push(env.duration_ns, at_ret);
        break;
      case GOTAP_COP_DEREF: {
        bool valid = pop(&x);
        uint64_t v = 0;
        unsigned size = std::min<unsigned>(in.b, 8);
        if (!valid) {
          push(0, false);
        } else if (x == 0) {
          push(0, (in.c & GOTAP_CDF_NIL_ZERO) != 0);
        } else {
          bool r = env.mem->read(x + static_cast<int64_t>(in.off), &v, size);
          push(ext(v, size, in.c & GOTAP_CDF_SIGNED), r);
        }
        break;
      }
      case GOTAP_COP_EXT:
        if (top > 0)
          st[top - 1] = ext(st[top - 1] >> ((in.a & 7) * 8), in.b, in.c & GOTAP_CDF_SIGNED);
        break;
      case GOTAP_COP_CMP: {
        bool vy = pop(&y), vx = pop(&x);
        push(vx && vy && compare(in.a, in.c, x, y), true);
        break;
      }
      case GOTAP_COP_NOT:
        if (top > 0) st[top - 1] = !st[top - 1];
        break;
      case GOTAP_COP_AND:
      case GOTAP_COP_OR:
        pop(&y);
        pop(&x);
        push(in.op == GOTAP_COP_AND ? (x && y) : (x || y), true);
        break;
      case GOTAP_COP_STR: {
        uint64_t len = 0, ptr = 0;
        bool vl = pop(&len), vp = pop(&ptr);
        const unsigned n = std::min<unsigned>(in.b, GOTAP_COND_MAX_LIT);
        const unsigned at = std::min<unsigned>(static_cast<unsigned>(in.off), GOTAP_COND_POOL - n);
        std::string_view lit(reinterpret_cast<const char*>(p.pool) + at, n);
        bool r = false;
        if (vl && vp) {
          const uint64_t want = in.a == GOTAP_CS_EQ ? (len == n ? n : 0)
                                : in.a == GOTAP_CS_PREFIX
                                    ? (len >= n ? n : 0)
                                    : std::min<uint64_t>(len, GOTAP_COND_HAYSTACK);
          char buf[GOTAP_COND_HAYSTACK];
          bool size_ok = in.a == GOTAP_CS_EQ ? len == n : len >= n;
          if (size_ok && (want == 0 || (ptr && env.mem->read(ptr, buf, want)))) {
            std::string_view s(buf, want);
            r = in.a == GOTAP_CS_CONTAINS ? s.find(lit) != std::string_view::npos : s == lit;
          }
        }
        push(r, true);
        break;
      }
      case GOTAP_COP_SETBIT:
        if (pop(&x) && x && in.a < 64) env.bits |= 1ull << in.a;
        break;
      case GOTAP_COP_BIT:
        push(in.a < 64 ? (env.bits >> in.a) & 1 : 0, true);
        break;
      case GOTAP_COP_STR2: {
        uint64_t l2 = 0, p2 = 0, l1 = 0, p1 = 0;
        bool v = pop(&l2);
        v = pop(&p2) && v;
        v = pop(&l1) && v;
        v = pop(&p1) && v;
        if (!v) {
          push(0, false);
        } else if (l1 != l2) {
          push(0, true);
        } else {
          int eq = equal_strings(*env.mem, p1, p2, l1);
          push(eq == 1, eq >= 0);
        }
        break;
      }
      case GOTAP_COP_SAVE: {
        const unsigned a = in.a & (GOTAP_COND_VALS - 1);
        bool v = pop(&x);
        env.vals[a] = x;
        if (v)
          env.bits |= 1ull << GOTAP_COND_VAL_BIT(a);
        else
          env.bits &= ~(1ull << GOTAP_COND_VAL_BIT(a));
        break;
      }
      case GOTAP_COP_LOAD: {
        const unsigned a = in.a & (GOTAP_COND_VALS - 1);
        push(env.vals[a], (env.bits >> GOTAP_COND_VAL_BIT(a)) & 1);
        break;
      }
      case GOTAP_COP_INDEX: {
        uint64_t i = 0, len = 0, ptr = 0;
        bool v = pop(&i);
        v = pop(&len) && v;
        v = pop(&ptr) && v;
        const int64_t si = static_cast<int64_t>(i);
        v = v && si >= 0 && si < static_cast<int64_t>(len);
        push(v ? ptr + i * in.imm : 0, v);
        break;
      }
      case GOTAP_COP_MAP_INDEX: {
        uint64_t type = 0, map = 0;
        pop(&type);
        bool v = pop(&map);
        const unsigned n = std::min<unsigned>(in.b, GOTAP_COND_MAX_LIT);
        const unsigned at = std::min<unsigned>(static_cast<unsigned>(in.off), GOTAP_COND_POOL - n);
        std::string_view key(reinterpret_cast<const char*>(p.pool) + at, n);
        std::optional<uint64_t> elem;
        if (v && map && env.dec) elem = env.dec->map_find(type, map, in.a == 1, key);
        push(elem.value_or(0), elem.has_value());
        break;
      }
      case GOTAP_COP_ITAB_TYPE:
        if (top > 0 && ok[top - 1] && st[top - 1]) {
          uint64_t t = 0;
          ok[top - 1] = env.mem->read(st[top - 1] + 8, &t, 8);
          st[top - 1] = t;
        }
        break;
      default:
        break;
    }
  }
  if (at_ret || !(p.flags & GOTAP_COND_AT_RET)) {
    uint64_t v = 0;
    return pop(&v) && v != 0;
  }
  return true;
}

}  // namespace gotap::cond
