// JSON Lines writer: one event per line, exactly the objects the backends emit.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "core/events/typed_events.h"
#include "core/model/json_utf8.h"
#include "core/output/writers.h"

namespace gotap {

namespace {

// Invalid UTF-8 in a name must not abort the dump: it is written as U+FFFD (cli.md). In a
// value it is written as U+00XX (docs/json.md) by value_json_safe, before the serializer.
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

class JsonLinesWriter : public EventSink {
 public:
  explicit JsonLinesWriter(std::FILE* out) : out_(out) {}
  void emit(const Event& ev) override {
    // One serializer, kept, writes each value, and the line is one buffer: a serializer per key
    // and value, and the strings they returned, were most of the ptrace backend's CPU per hit
    // (issue 22).
    n_ = 0;
    auto kind = ev.find("event");
    if (ev.is_object() && kind != ev.end()) {
      // "event" first, as in docs/json.md, so a reader sees what a line is at its start.
      lit("{\"event\":");
      dump(*kind);
      for (auto it = ev.begin(); it != ev.end(); ++it) {
        if (it == kind) continue;
        ch(',');
        str(it.key());
        ch(':');
        // The parameters hold values: their strings are the program's bytes.
        if (it.key() == "args" || it.key() == "results")
          safe_dump(it.value());
        else
          dump(it.value());
      }
      ch('}');
    } else {
      dump(ev);
    }
    write();
  }

  // The call events, straight from their structs: the same bytes as emit(to_event(x)) gives,
  // whose keys come out in the order of the object's std::map (sorted), "event" first.
  void emit_entry(const CallEntry& e) override {
    n_ = 0;
    lit("{\"event\":\"entry\",\"args\":");
    params(e.args);
    site_tail(
        e,
        [&] {
          if (e.inlined) {
            lit(",\"inlined\":true");
            if (!e.inlined_in.empty()) {
              lit(",\"inlined_in\":");
              str(e.inlined_in);
            }
          }
        },
        [&] { stack(e.stack); });
    ch('}');
    write();
  }
  void emit_return(const CallReturn& r) override {
    n_ = 0;
    lit("{\"event\":\"return\"");
    if (r.duration_ns) {
      lit(",\"duration_ns\":");
      num(*r.duration_ns);
    }
    ch(',');
    // func, goid, pid, then results and stack, then tid, ts_ns: as sorted.
    lit("\"func\":");
    str(r.func);
    goid(r.goid);
    lit(",\"pid\":");
    num(r.pid);
    lit(",\"results\":");
    params(r.results);
    stack(r.stack);
    lit(",\"tid\":");
    num(r.tid);
    lit(",\"ts_ns\":");
    num(r.ts_ns);
    if (r.wall_ns) {
      lit(",\"wall_ns\":");
      num(*r.wall_ns);
    }
    if (r.why) {
      lit(",\"why\":");
      dump(*r.why);
    }
    ch('}');
    write();
  }
  void emit_unfinished(const CallUnfinished& u) override {
    n_ = 0;
    lit("{\"event\":\"unfinished\",\"entry_ts_ns\":");
    num(u.entry_ts_ns);
    lit(",\"func\":");
    str(u.func);
    goid(u.goid);
    lit(",\"pid\":");
    num(u.pid);
    if (!u.reason.empty()) {
      lit(",\"reason\":");
      str(u.reason);
    }
    lit(",\"tid\":");
    num(u.tid);
    lit(",\"ts_ns\":");
    num(u.ts_ns);
    ch('}');
    write();
  }

  void flush() override { std::fflush(out_); }

 private:
  // An entry's fields after "args": func, goid, `mid` (inlined, inlined_in), pid, `late`
  // (stack), tid, ts_ns.
  template <class Mid, class Late>
  void site_tail(const CallSite& s, Mid mid, Late late) {
    lit(",\"func\":");
    str(s.func);
    goid(s.goid);
    mid();
    lit(",\"pid\":");
    num(s.pid);
    late();
    lit(",\"tid\":");
    num(s.tid);
    lit(",\"ts_ns\":");
    num(s.ts_ns);
  }

  // The line is written by hand into buf_, whose size is kept at least what it holds, through
  // appends that the compiler inlines: a std::string append per piece (about 25 a call) was
  // most of the writer's CPU (issue 22).
  char* room(size_t n) {
    if (buf_.size() - n_ < n) [[unlikely]]
      grow(n);
    return buf_.data() + n_;
  }
  [[gnu::noinline]] void grow(size_t n) { buf_.resize(std::max(2 * buf_.size(), n_ + n)); }
  void raw(const char* s, size_t len) {
    std::memcpy(room(len), s, len);
    n_ += len;
  }
  // A literal's length is known here, so that its copy is a few moves, not a memcpy call.
  template <size_t N>
  void lit(const char (&s)[N]) {
    std::memcpy(room(N - 1), s, N - 1);
    n_ += N - 1;
  }
  void ch(char c) {
    *room(1) = c;
    ++n_;
  }
  // What the serializer writes for `v`, through its own buffer.
  void dump(const Event& v) {
    ser_.clear();
    out_json_.dump(v, false, false, 0);
    raw(ser_.data(), ser_.size());
  }

  // A value's JSON: its invalid UTF-8 bytes as U+00XX, copied only when it has some.
  void safe_dump(const Event& v) {
    if (value_json_is_safe(v)) return dump(v);
    dump(value_json_safe(v));
  }

  template <class T>
  void num(T v) {
    fmt::format_int f(v);
    raw(f.data(), f.size());
  }

  // Left out when gotap reads no goid (kNoGoid), as event_json.cpp does.
  void goid(int64_t g) {
    if (g == kNoGoid) return;
    lit(",\"goid\":");
    num(g);
  }

  // Plain printable ASCII, nearly every name and most strings, needs no escape.
  static bool plain(const std::string& s) {
    for (unsigned char c : s)
      if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
    return true;
  }
  void quoted(const std::string& s) {
    char* p = room(s.size() + 2);
    *p = '"';
    std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    n_ += s.size() + 2;
  }

  // A string as the serializer writes it: a plain one is copied as it is; anything else goes
  // through the serializer itself.
  void str(const std::string& s) {
    if (plain(s)) return quoted(s);
    scratch_ = s;
    dump(scratch_);
  }

  // A value as the serializer writes it. Scalars, nearly every traced value, are appended
  // here without the serializer's dispatch and its output adapter's virtual calls (issue 22);
  // floats (shortest round-trip digits, "null" for NaN and infinities) and composite values
  // go through the serializer.
  void value(const Event& v) {
    using T = nlohmann::json::value_t;
    switch (v.type()) {
      case T::null:
        lit("null");
        return;
      case T::boolean:
        if (v.get_ref<const bool&>())
          lit("true");
        else
          lit("false");
        return;
      case T::number_integer:
        return num(v.get_ref<const Event::number_integer_t&>());
      case T::number_unsigned:
        return num(v.get_ref<const Event::number_unsigned_t&>());
      case T::string: {
        const auto& s = v.get_ref<const std::string&>();
        if (plain(s)) return quoted(s);
        return safe_dump(v);
      }
      default:
        break;
    }
    safe_dump(v);
  }

  void params(const std::vector<Param>& ps) {
    ch('[');
    bool first = true;
    for (const auto& p : ps) {
      if (!first) ch(',');
      first = false;
      lit("{\"name\":");
      str(p.name);
      lit(",\"type\":");
      str(p.type);
      lit(",\"value\":");
      value(p.value);
      ch('}');
    }
    ch(']');
  }

  void stack(const std::optional<Event>& st) {
    if (!st) return;
    lit(",\"stack\":");
    dump(*st);
  }

  void write() {
    ch('\n');
    std::fwrite(buf_.data(), 1, n_, out_);
  }

  std::FILE* out_;
  std::string buf_ = std::string(512, '\0');  // the line is buf_[0, n_); kept for the next
  size_t n_ = 0;
  std::string ser_;  // what the serializer wrote, for a value it writes
  // Writes into ser_; kept with it, so that a line does not set one up.
  nlohmann::detail::serializer<nlohmann::json> out_json_{
      nlohmann::detail::output_adapter<char, std::string>(ser_), ' ', kReplace};
  Event scratch_;  // a string that needs escaping, as the serializer takes it
};

}  // namespace

std::unique_ptr<EventSink> make_json_lines_writer(std::FILE* out) {
  return std::make_unique<JsonLinesWriter>(out);
}

}  // namespace gotap
