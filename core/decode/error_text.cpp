// The "error" of an interface value (docs/json.md): the text Go's Error() method returns, for
// the error types the standard library makes, composed from the value's fields as Go's own
// methods compose it. Read through the decoder's budget and memory, so that both backends
// compose it from what they read (ptrace: the tracee; eBPF: what the kernel copied).
#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "core/decode/value_decoder.h"
#include "core/model/go_quote.h"

namespace gotap {

namespace {

// Nested errors followed (url.Error -> net.OpError -> os.SyscallError -> syscall.Errno is 4).
constexpr int kMaxErrorDepth = 6;

struct Errno {
  int num;
  const char* text;
};
constexpr Errno kErrnoText[] = {
#include "core/decode/go_errno_text.inc"
};

std::string errno_text(uint64_t e, const GoVersion& go) {
  if (e == 116 && !go.at_least(1, 26)) return "stale NFS file handle";
  for (const auto& x : kErrnoText)
    if (static_cast<uint64_t>(x.num) == e) return x.text;
  return "errno " + std::to_string(static_cast<int64_t>(e));
}

// net.IP's String(): dotted for IPv4 (also IPv4 in IPv6), RFC 5952 for IPv6.
std::string ip_text(const std::string& ip) {
  if (ip.empty()) return "<nil>";
  const auto* b = reinterpret_cast<const unsigned char*>(ip.data());
  static const unsigned char v4in6[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (ip.size() == 4 || (ip.size() == 16 && std::memcmp(b, v4in6, 12) == 0)) {
    const unsigned char* v = ip.size() == 4 ? b : b + 12;
    return fmt::format("{}.{}.{}.{}", v[0], v[1], v[2], v[3]);
  }
  if (ip.size() == 16) {
    char buf[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, b, buf, sizeof buf)) return buf;
  }
  std::string hex = "?";
  for (unsigned char c : ip) hex += fmt::format("{:02x}", c);
  return hex;
}

std::string join_host_port(const std::string& host, int64_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace

bool ValueDecoder::has_error_text(std::string_view type) {
  static const std::unordered_set<std::string_view> known = {"*errors.errorString",
                                                             "*fmt.wrapError",
                                                             "*fmt.wrapErrors",
                                                             "*fs.PathError",
                                                             "*os.SyscallError",
                                                             "*net.OpError",
                                                             "*url.Error",
                                                             "*net.DNSError",
                                                             "*net.AddrError",
                                                             "syscall.Errno",
                                                             "*poll.DeadlineExceededError",
                                                             "poll.errNetClosing",
                                                             "context.deadlineExceededError"};
  return known.count(type) != 0;
}

std::optional<std::string> ValueDecoder::error_text(uint64_t rtype, uint64_t data, int depth) {
  if (depth > kMaxErrorDepth || !rtype) return std::nullopt;
  const TInfo& t = info(rtype | kRtypeTag);
  if (!t.valid) return std::nullopt;
  const std::string& name = t.name;
  // Errors whose text is a constant of their type: the type word is all there is to read.
  if (name == "*poll.DeadlineExceededError") return "i/o timeout";
  if (name == "poll.errNetClosing") return "use of closed network connection";
  if (name == "context.deadlineExceededError") return "context deadline exceeded";
  if (name == "syscall.Errno") {
    // Not pointer-shaped: the interface's data word points to the number.
    auto e = mem_.u64(data);
    if (!e) return std::nullopt;
    return errno_text(*e, env_.rt.go);
  }
  if (t.kind != GoKind::Ptr || !data) return std::nullopt;
  const TInfo& s = info(t.elem);
  if (!s.valid || s.kind != GoKind::Struct) return std::nullopt;
  auto field = [&](std::string_view f) -> const TField* {
    for (const auto& x : s.fields)
      if (x.name == f) return &x;
    return nullptr;
  };
  // A string (or []byte) field's bytes, whole: a string cut at --max-str makes no text.
  auto str = [&](std::string_view f) -> std::optional<std::string> {
    const TField* x = field(f);
    if (!x) return std::nullopt;
    const GoKind k = info(x->type).kind;
    if (k != GoKind::String && k != GoKind::Slice) return std::nullopt;
    uint64_t w[2];
    if (!mem_.read(data + x->offset, w, sizeof w)) return std::nullopt;
    if (w[1] > static_cast<uint64_t>(lim_.max_str)) return std::nullopt;
    std::string out(w[1], '\0');
    if (w[1] && !mem_.read(w[0], out.data(), out.size())) return std::nullopt;
    return out;
  };
  // An interface field: nullopt when unreadable, "" with nil set when nil.
  auto iface = [&](std::string_view f, bool& nil) -> std::optional<std::pair<uint64_t, uint64_t>> {
    nil = false;
    const TField* x = field(f);
    if (!x || info(x->type).kind != GoKind::Interface) return std::nullopt;
    uint64_t w[2];
    if (!mem_.read(data + x->offset, w, sizeof w)) return std::nullopt;
    if (!w[0]) {
      nil = true;
      return std::pair<uint64_t, uint64_t>{0, 0};
    }
    const bool eface = info(x->type).eface;
    auto typ = eface ? std::optional<uint64_t>(w[0]) : mem_.u64(w[0] + itab_type_off());
    if (!typ) return std::nullopt;
    return std::pair<uint64_t, uint64_t>{*typ, w[1]};
  };
  // An error field's Error(); Go's "%s" of a nil error is "%!s(<nil>)", its .Error() panics.
  auto err = [&](std::string_view f) -> std::optional<std::string> {
    bool nil;
    auto v = iface(f, nil);
    if (!v) return std::nullopt;
    if (nil) return name == "*url.Error" ? std::optional<std::string>("%!s(<nil>)") : std::nullopt;
    return error_text(v->first, v->second, depth + 1);
  };
  // A net.Addr field's String(), "" with nil set when nil.
  auto addr = [&](std::string_view f, bool& nil) -> std::optional<std::string> {
    auto v = iface(f, nil);
    if (!v || nil) return v ? std::optional<std::string>("") : std::nullopt;
    return addr_text(v->first, v->second);
  };
  if (name == "*errors.errorString") return str("s");
  if (name == "*fmt.wrapError" || name == "*fmt.wrapErrors") return str("msg");
  if (name == "*fs.PathError") {
    auto op = str("Op"), path = str("Path"), e = err("Err");
    if (!op || !path || !e) return std::nullopt;
    return *op + " " + *path + ": " + *e;
  }
  if (name == "*os.SyscallError") {
    auto sc = str("Syscall"), e = err("Err");
    if (!sc || !e) return std::nullopt;
    return *sc + ": " + *e;
  }
  if (name == "*url.Error") {
    auto op = str("Op"), url = str("URL"), e = err("Err");
    if (!op || !url || !e) return std::nullopt;
    return *op + " " + quote_go_string(*url) + ": " + *e;
  }
  if (name == "*net.OpError") {
    auto op = str("Op"), net = str("Net");
    bool src_nil = true, addr_nil = true;
    auto src = addr("Source", src_nil), dst = addr("Addr", addr_nil);
    auto e = err("Err");
    if (!op || !net || !src || !dst || !e) return std::nullopt;
    std::string out = *op;
    if (!net->empty()) out += " " + *net;
    if (!src_nil) out += " " + *src;
    if (!addr_nil) out += (src_nil ? " " : "->") + *dst;
    return out + ": " + *e;
  }
  if (name == "*net.DNSError") {
    auto e = str("Err"), host = str("Name"), server = str("Server");
    if (!e || !host || !server) return std::nullopt;
    std::string out = "lookup " + *host;
    if (!server->empty()) out += " on " + *server;
    return out + ": " + *e;
  }
  if (name == "*net.AddrError") {
    auto e = str("Err"), a = str("Addr");
    if (!e || !a) return std::nullopt;
    return a->empty() ? *e : "address " + *a + ": " + *e;
  }
  return std::nullopt;
}

std::optional<std::string> ValueDecoder::addr_text(uint64_t rtype, uint64_t data) {
  const TInfo& t = info(rtype | kRtypeTag);
  if (!t.valid || t.kind != GoKind::Ptr || !data) return std::nullopt;
  const std::string& name = t.name;
  const TInfo& s = info(t.elem);
  if (!s.valid || s.kind != GoKind::Struct) return std::nullopt;
  auto bytes = [&](std::string_view f) -> std::optional<std::string> {
    for (const auto& x : s.fields) {
      if (x.name != f) continue;
      uint64_t w[2];
      if (!mem_.read(data + x.offset, w, sizeof w)) return std::nullopt;
      if (w[1] > static_cast<uint64_t>(lim_.max_str)) return std::nullopt;
      std::string out(w[1], '\0');
      if (w[1] && !mem_.read(w[0], out.data(), out.size())) return std::nullopt;
      return out;
    }
    return std::nullopt;
  };
  auto port = [&]() -> std::optional<int64_t> {
    for (const auto& x : s.fields)
      if (x.name == "Port") {
        auto v = mem_.u64(data + x.offset);
        if (v) return static_cast<int64_t>(*v);
      }
    return std::nullopt;
  };
  if (name == "*net.UnixAddr") return bytes("Name");
  if (name != "*net.TCPAddr" && name != "*net.UDPAddr" && name != "*net.IPAddr")
    return std::nullopt;
  auto ip = bytes("IP"), zone = bytes("Zone");
  if (!ip || !zone) return std::nullopt;
  // ipEmptyString: an empty IP is "", not "<nil>".
  std::string host = ip->empty() ? "" : ip_text(*ip);
  if (!zone->empty()) host += "%" + *zone;
  if (name == "*net.IPAddr") return host;
  auto p = port();
  if (!p) return std::nullopt;
  return join_host_port(host, *p);
}

}  // namespace gotap
