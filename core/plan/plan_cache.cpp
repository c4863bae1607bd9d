#include "core/plan/plan_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "core/sys/fd.h"
#include "core/sys/private_dir.h"

namespace gotap {

namespace {

// The file: magic, format version, payload size, payload checksum, payload. The payload is
// the key, a string table (the plan's names and files repeat: an outer function's name and
// file for each of its inline sites) and the functions, each string an index into the table.
constexpr char kMagic[8] = {'G', 'O', 'T', 'A', 'P', 'P', 'L', 'N'};
constexpr uint32_t kFormat = 4;  // bump when the layout or FuncPlan changes
constexpr size_t kHeader = sizeof kMagic + 4 + 4 + 8 + 8;
constexpr size_t kMaxFiles = 32;

// FNV-1a, 64 bits: a checksum against truncation and corruption. It does not resist a forged
// file: the sites of a plan read back are checked against the binary instead
// (core/plan/cached_sites.h).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  // `s` must outlive the writer (the plan being encoded does).
  void str(std::string_view s) {
    auto [it, added] = index_.try_emplace(s, static_cast<uint32_t>(strings_.size()));
    if (added) strings_.push_back(s);
    u32(it->second);
  }
  void addrs(const std::vector<uint64_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (uint64_t a : v) u64(a);
  }
  // The string table, then the records.
  std::string finish(std::string_view key) {
    Writer head;
    head.u32(static_cast<uint32_t>(key.size()));
    head.out_.append(key);
    head.u32(static_cast<uint32_t>(strings_.size()));
    for (std::string_view s : strings_) {
      head.u32(static_cast<uint32_t>(s.size()));
      head.out_.append(s);
    }
    head.out_.append(out_);
    return std::move(head.out_);
  }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
  std::unordered_map<std::string_view, uint32_t> index_;
  std::vector<std::string_view> strings_;
};

// Bounds-checked reads: any read past the end, or a string index out of the table, makes
// the whole file invalid (ok() false), and values read after that are zero.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == b_.size(); }
  uint8_t u8() {
    uint8_t v = 0;
    raw(&v, 1);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    raw(&v, sizeof v);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    raw(&v, sizeof v);
    return v;
  }
  std::string_view bytes(size_t n) {
    if (!ok_ || n > b_.size() - pos_) return fail(), std::string_view();
    auto s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // A count of elements each at least `min_size` bytes: never more than the bytes left, so a
  // corrupt count cannot make the reader allocate much.
  uint32_t count(size_t min_size) {
    uint32_t n = u32();
    if (ok_ && n > (b_.size() - pos_) / min_size) fail();
    return ok_ ? n : 0;
  }
  // The table's strings are copied into one buffer that the plan keeps (view() hands out
  // views into it), so that the file's bytes need not be kept.
  void read_table() {
    uint32_t n = count(4);
    std::vector<std::string_view> in;
    in.reserve(n);
    size_t total = 0;
    for (uint32_t i = 0; i < n && ok_; ++i) {
      in.push_back(bytes(u32()));
      total += in.back().size();
    }
    auto buf = std::make_shared<std::string>();
    buf->reserve(total);
    for (std::string_view s : in) buf->append(s);
    table_.reserve(in.size());
    size_t at = 0;
    for (std::string_view s : in) {
      table_.push_back(std::string_view(*buf).substr(at, s.size()));
      at += s.size();
    }
    strings_ = std::move(buf);
  }
  std::string str() { return std::string(view()); }
  // Valid while strings() lives.
  std::string_view view() {
    uint32_t i = u32();
    if (ok_ && i >= table_.size()) fail();
    return ok_ ? table_[i] : std::string_view();
  }
  std::shared_ptr<const std::string> strings() const { return strings_; }
  std::vector<uint64_t> addrs() {
    std::vector<uint64_t> v(count(8));
    for (auto& a : v) a = u64();
    return v;
  }
  void fail() { ok_ = false; }

 private:
  void raw(void* p, size_t n) {
    if (!ok_ || n > b_.size() - pos_) return fail();
    std::memcpy(p, b_.data() + pos_, n);
    pos_ += n;
  }
  std::string_view b_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::vector<std::string_view> table_;
  std::shared_ptr<const std::string> strings_;
};

void put_params(Writer& w, const std::vector<ParamLoc>& ps) {
  w.u32(static_cast<uint32_t>(ps.size()));
  for (const auto& p : ps) {
    w.str(p.name);
    w.str(p.type_name);
    w.u64(p.type);
    w.u64(p.size);
    w.u8(p.is_result);
    w.u32(static_cast<uint32_t>(p.loc.pieces.size()));
    for (const auto& l : p.loc.pieces) {
      w.u8(l.kind);
      w.u8(l.reg);
      w.u8(l.reg_byte);
      w.u64(static_cast<uint64_t>(l.stack_offset));
      w.u32(l.value_offset);
      w.u32(l.size);
    }
  }
}

std::vector<ParamLoc> get_params(Reader& r) {
  std::vector<ParamLoc> ps(r.count(29));
  for (auto& p : ps) {
    p.name = r.str();
    p.type_name = r.str();
    p.type = r.u64();
    p.size = r.u64();
    p.is_result = r.u8() != 0;
    p.loc.pieces.resize(r.count(18));
    for (auto& l : p.loc.pieces) {
      uint8_t kind = r.u8();
      if (kind > LocPiece::RegMem) r.fail();
      l.kind = static_cast<LocPiece::Kind>(kind);
      l.reg = r.u8();
      l.reg_byte = r.u8();
      if (l.reg_byte > 7) r.fail();
      l.stack_offset = static_cast<int64_t>(r.u64());
      l.value_offset = r.u32();
      l.size = r.u32();
    }
  }
  return ps;
}

void put_sites(Writer& w, const std::vector<InlineSite>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) {
    w.str(s.outer);
    w.u64(s.pc);
    w.str(s.file);
    w.u32(static_cast<uint32_t>(s.line));
    w.u32(static_cast<uint32_t>(s.sp_delta));
    w.str(s.skip_reason);
  }
}

std::vector<InlineSite> get_sites(Reader& r) {
  std::vector<InlineSite> v(r.count(28));
  for (auto& s : v) {
    s.outer = r.view();
    s.pc = r.u64();
    s.file = r.view();
    s.line = static_cast<int>(r.u32());
    s.sp_delta = static_cast<int32_t>(r.u32());
    s.skip_reason = r.view();
  }
  return v;
}

std::string file_name(std::string_view key) {
  return fmt::format("{:016x}.plan", fnv1a(key));
}

// Keeps the newest kMaxFiles cache files of the directory open at `dir`.
void prune(int dir) {
  int fd = ::dup(dir);
  DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (!d) {
    if (fd >= 0) ::close(fd);
    return;
  }
  std::vector<std::pair<timespec, std::string>> files;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    struct stat st;
    if (name.ends_with(".plan") && ::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st.st_mode))
      files.push_back({st.st_mtim, std::string(name)});
  }
  ::closedir(d);
  if (files.size() <= kMaxFiles) return;
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.tv_sec, a.first.tv_nsec) > std::tie(b.first.tv_sec, b.first.tv_nsec);
  });
  for (size_t i = kMaxFiles; i < files.size(); ++i) ::unlinkat(dir, files[i].second.c_str(), 0);
}

// A name for a temporary file no other gotap picks at the same moment.
std::string temp_name() {
  static std::atomic<uint64_t> n{0};
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return fmt::format(".tmp.{}.{}.{}", ::getpid(), ts.tv_nsec, n++);
}

// $XDG_CACHE_HOME or $HOME when gotap's user owns it (or, not made yet, what it would be made
// in): `sudo -E` gives root a user's, where root would make root-owned directories, or follow
// a link that user planted.
std::optional<std::string> own_base(const char* var) {
  const char* v = std::getenv(var);
  if (!v || *v != '/' || !sys::nearest_dir_is_own(v)) return std::nullopt;
  return std::string(v);
}

}  // namespace

std::string encode_plan_cache(std::string_view key, const std::vector<FuncPlan>& funcs,
                              const std::vector<std::string>& warnings) {
  Writer w;
  w.u32(static_cast<uint32_t>(funcs.size()));
  for (const auto& f : funcs) {
    w.str(f.name);
    w.u64(f.entry);
    w.u64(f.end);
    w.u64(f.entry_probe);
    w.str(f.entry_probe_kind);
    w.u8(f.entry_refires);
    w.u64(f.morestack_call);
    w.addrs(f.ret_sites);
    w.addrs(f.tail_jumps);
    w.str(f.abi);
    w.str(f.args_source);
    put_params(w, f.args);
    put_params(w, f.results);
    w.u32(static_cast<uint32_t>(f.frame_size));
    w.str(f.file);
    w.u32(static_cast<uint32_t>(f.line));
    put_sites(w, f.inline_sites);
    put_sites(w, f.inline_skipped);
    w.u8(f.inline_probed);
  }
  w.u32(static_cast<uint32_t>(warnings.size()));
  for (const auto& s : warnings) w.str(s);
  return plan_cache_with_header(w.finish(key));
}

std::string plan_cache_with_header(std::string_view payload) {
  std::string out(kMagic, sizeof kMagic);
  out.reserve(kHeader + payload.size());
  uint32_t words[2] = {kFormat, 0};
  uint64_t sizes[2] = {payload.size(), fnv1a(payload)};
  out.append(reinterpret_cast<const char*>(words), sizeof words);
  out.append(reinterpret_cast<const char*>(sizes), sizeof sizes);
  out.append(payload);
  return out;
}

std::optional<CachedPlan> decode_plan_cache(std::string_view bytes, std::string_view key) {
  if (bytes.size() < kHeader || bytes.substr(0, sizeof kMagic) != std::string_view(kMagic, 8))
    return std::nullopt;
  Reader head(bytes.substr(sizeof kMagic, kHeader - sizeof kMagic));
  if (head.u32() != kFormat || head.u32() != 0) return std::nullopt;
  uint64_t size = head.u64(), sum = head.u64();
  std::string_view payload = bytes.substr(kHeader);
  if (payload.size() != size || fnv1a(payload) != sum) return std::nullopt;

  Reader r(payload);
  if (r.bytes(r.u32()) != key || !r.ok()) return std::nullopt;
  r.read_table();
  CachedPlan plan;
  plan.funcs.resize(r.count(16));
  for (auto& f : plan.funcs) {
    f.name = r.str();
    f.entry = r.u64();
    f.end = r.u64();
    f.entry_probe = r.u64();
    f.entry_probe_kind = r.str();
    f.entry_refires = r.u8() != 0;
    f.morestack_call = r.u64();
    f.ret_sites = r.addrs();
    f.tail_jumps = r.addrs();
    f.abi = r.str();
    f.args_source = r.str();
    f.args = get_params(r);
    f.results = get_params(r);
    f.frame_size = static_cast<int32_t>(r.u32());
    f.file = r.str();
    f.line = static_cast<int>(r.u32());
    f.inline_sites = get_sites(r);
    f.inline_skipped = get_sites(r);
    f.inline_probed = r.u8() != 0;
    if (!r.ok()) return std::nullopt;
  }
  plan.warnings.resize(r.count(4));
  for (auto& s : plan.warnings) s = r.str();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  plan.strings = r.strings();
  return plan;
}

std::string plan_cache_dir() {
  if (const char* e = std::getenv("GOTAP_PLAN_CACHE"); e && *e) {
    std::string_view v(e);
    if (v == "0" || v == "off") return "";
    if (v.starts_with('/')) return std::string(v);
  }
  if (auto x = own_base("XDG_CACHE_HOME")) return *x + "/gotap/plans";
  if (auto h = own_base("HOME")) return *h + "/.cache/gotap/plans";
  // The user's own home, from the password database: root's is /root.
  if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir && *pw->pw_dir == '/') {
    std::string home = pw->pw_dir;
    if (sys::nearest_dir_is_own(home)) return home + "/.cache/gotap/plans";
  }
  return "";
}

std::optional<CachedPlan> load_plan_cache(const std::string& dir, std::string_view key) {
  if (dir.empty()) return std::nullopt;
  sys::Fd d = sys::open_private_dir(dir, /*create=*/false);
  if (!d) return std::nullopt;
  int fd = ::openat(d.get(), file_name(key).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::string bytes;
  // Only a regular file of the user's own, not writable by others.
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      (st.st_mode & 022) == 0) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
  }
  ::close(fd);
  return decode_plan_cache(bytes, key);
}

void store_plan_cache(const std::string& dir, std::string_view key,
                      const std::vector<FuncPlan>& funcs,
                      const std::vector<std::string>& warnings) {
  if (dir.empty()) return;
  sys::Fd d = sys::open_private_dir(dir, /*create=*/true);
  if (!d) return;
  std::string bytes = encode_plan_cache(key, funcs, warnings);
  const std::string tmp = temp_name();
  int fd =
      ::openat(d.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t put = 0;
  while (put < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + put, bytes.size() - put);
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  const bool closed = ::close(fd) == 0;
  bool ok = put == bytes.size() && closed;
  if (!ok || ::renameat(d.get(), tmp.c_str(), d.get(), file_name(key).c_str()) != 0) {
    ::unlinkat(d.get(), tmp.c_str(), 0);
    return;
  }
  prune(d.get());
}

}  // namespace gotap
