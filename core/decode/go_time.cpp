#include "core/decode/go_time.h"

#include <fmt/format.h>

namespace gotap {

namespace {

// "1.500" -> "1.5", "2.000" -> "2": Go prints a fraction without trailing zeros.
std::string with_fraction(uint64_t whole, uint64_t frac, int digits) {
  std::string s = std::to_string(whole);
  if (frac == 0) return s;
  std::string f = fmt::format("{:0{}}", frac, digits);
  while (!f.empty() && f.back() == '0') f.pop_back();
  return s + "." + f;
}

// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
void civil_from_days(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

}  // namespace

std::string format_go_duration(int64_t ns) {
  if (ns == 0) return "0s";
  bool neg = ns < 0;
  // The magnitude of INT64_MIN does not fit an int64.
  uint64_t u = neg ? uint64_t(0) - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  std::string s;
  if (u < 1000) {
    s = std::to_string(u) + "ns";
  } else if (u < 1'000'000) {
    s = with_fraction(u / 1000, u % 1000, 3) + "\u00b5s";
  } else if (u < 1'000'000'000) {
    s = with_fraction(u / 1'000'000, u % 1'000'000, 6) + "ms";
  } else {
    uint64_t sec = u / 1'000'000'000, frac = u % 1'000'000'000;
    uint64_t h = sec / 3600, m = sec / 60 % 60;
    s = with_fraction(sec % 60, frac, 9) + "s";
    if (h || m) s = std::to_string(m) + "m" + s;
    if (h) s = std::to_string(h) + "h" + s;
  }
  return neg ? "-" + s : s;
}

GoInstant go_instant(uint64_t wall, int64_t ext) {
  constexpr uint64_t kHasMonotonic = 1ull << 63;
  constexpr int64_t kWallToInternal = 59453308800;   // 1885-01-01 in seconds since year 1
  constexpr int64_t kInternalToUnix = -62135596800;  // year 1 to 1970
  GoInstant t;
  t.nsec = static_cast<int32_t>(wall & ((1u << 30) - 1));
  int64_t sec;
  if (wall & kHasMonotonic) {
    sec = kWallToInternal + static_cast<int64_t>((wall << 1) >> 31);
    t.has_mono = true;
    t.mono_ns = ext;
  } else {
    sec = ext;
  }
  // ext is any int64 when the words are not a real Time: never overflow on it.
  t.valid = !__builtin_add_overflow(sec, kInternalToUnix, &t.unix_sec);
  return t;
}

std::string format_go_time(const GoInstant& t, int64_t offset_s, const std::string& zone) {
  // Go's zone offsets are within a day; years beyond +-2^40 days are not a real time.
  constexpr int64_t kMaxAbsSec = int64_t(1) << 55;
  if (!t.valid || offset_s < -86400 || offset_s > 86400 || t.unix_sec < -kMaxAbsSec ||
      t.unix_sec > kMaxAbsSec)
    return "";
  int64_t local = t.unix_sec + offset_s;
  int64_t days = floor_div(local, 86400), rem = local - days * 86400;
  int64_t y;
  unsigned mo, d;
  civil_from_days(days, &y, &mo, &d);
  std::string s = fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", y, mo, d, rem / 3600,
                              rem / 60 % 60, rem % 60);
  if (t.nsec) {
    std::string f = fmt::format("{:09}", t.nsec);
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  int64_t off = offset_s < 0 ? -offset_s : offset_s;
  s += fmt::format(" {}{:02}{:02} {}", offset_s < 0 ? '-' : '+', off / 3600, off / 60 % 60, zone);
  if (t.has_mono) {
    uint64_t m = t.mono_ns < 0 ? uint64_t(0) - static_cast<uint64_t>(t.mono_ns)
                               : static_cast<uint64_t>(t.mono_ns);
    s += fmt::format(" m={}{}.{:09}", t.mono_ns < 0 ? '-' : '+', m / 1'000'000'000,
                     m % 1'000'000'000);
  }
  return s;
}

}  // namespace gotap
