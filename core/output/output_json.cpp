// JSON Lines writer: one event per line, exactly the objects the backends emit.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "core/events/typed_events.h"
#include "core/output/writers.h"

namespace gotap {

namespace {

// Invalid UTF-8 from the tracee must not abort the dump: escape it instead (docs/json.md:
// invalid bytes appear as \u00XX).
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

class JsonLinesWriter : public EventSink {
 public:
  explicit JsonLinesWriter(std::FILE* out) : out_(out) {}
  void emit(const Event& ev) override {
    // One serializer writes the whole line into one buffer: a serializer per key and value,
    // and the strings they returned, were most of the ptrace backend's CPU per hit (issue 22).
    line_.clear();
    auto kind = ev.find("event");
    if (ev.is_object() && kind != ev.end()) {
      // "event" first, as in docs/json.md, so a reader sees what a line is at its start.
      line_ += "{\"event\":";
      out_json_.dump(*kind, false, false, 0);
      for (auto it = ev.begin(); it != ev.end(); ++it) {
        if (it == kind) continue;
        line_ += ',';
        str(it.key());
        line_ += ':';
        out_json_.dump(it.value(), false, false, 0);
      }
      line_ += '}';
    } else {
      out_json_.dump(ev, false, false, 0);
    }
    write();
  }

  // The call events, straight from their structs: the same bytes as emit(to_event(x)) gives,
  // whose keys come out in the order of the object's std::map (sorted), "event" first.
  void emit_entry(const CallEntry& e) override {
    line_.clear();
    line_ += "{\"event\":\"entry\",\"args\":";
    params(e.args);
    site_tail(
        e,
        [&] {
          if (e.inlined) {
            line_ += ",\"inlined\":true";
            if (!e.inlined_in.empty()) {
              line_ += ",\"inlined_in\":";
              str(e.inlined_in);
            }
          }
        },
        [&] { stack(e.stack); });
    line_ += '}';
    write();
  }
  void emit_return(const CallReturn& r) override {
    line_.clear();
    line_ += "{\"event\":\"return\"";
    if (r.duration_ns) {
      line_ += ",\"duration_ns\":";
      num(*r.duration_ns);
    }
    line_ += ',';
    // func, goid, pid, then results and stack, then tid, ts_ns: as sorted.
    line_ += "\"func\":";
    str(r.func);
    line_ += ",\"goid\":";
    num(r.goid);
    line_ += ",\"pid\":";
    num(r.pid);
    line_ += ",\"results\":";
    params(r.results);
    stack(r.stack);
    line_ += ",\"tid\":";
    num(r.tid);
    line_ += ",\"ts_ns\":";
    num(r.ts_ns);
    if (r.wall_ns) {
      line_ += ",\"wall_ns\":";
      num(*r.wall_ns);
    }
    line_ += '}';
    write();
  }
  void emit_unfinished(const CallUnfinished& u) override {
    line_.clear();
    line_ += "{\"event\":\"unfinished\",\"entry_ts_ns\":";
    num(u.entry_ts_ns);
    line_ += ",\"func\":";
    str(u.func);
    line_ += ",\"goid\":";
    num(u.goid);
    line_ += ",\"pid\":";
    num(u.pid);
    line_ += ",\"tid\":";
    num(u.tid);
    line_ += ",\"ts_ns\":";
    num(u.ts_ns);
    line_ += '}';
    write();
  }

  void flush() override { std::fflush(out_); }

 private:
  // An entry's fields after "args": func, goid, `mid` (inlined, inlined_in), pid, `late`
  // (stack), tid, ts_ns.
  template <class Mid, class Late>
  void site_tail(const CallSite& s, Mid mid, Late late) {
    line_ += ",\"func\":";
    str(s.func);
    line_ += ",\"goid\":";
    num(s.goid);
    mid();
    line_ += ",\"pid\":";
    num(s.pid);
    late();
    line_ += ",\"tid\":";
    num(s.tid);
    line_ += ",\"ts_ns\":";
    num(s.ts_ns);
  }

  template <class T>
  void num(T v) {
    fmt::format_int f(v);
    line_.append(f.data(), f.size());
  }

  // Plain printable ASCII, nearly every name and most strings, needs no escape.
  static bool plain(const std::string& s) {
    for (unsigned char c : s)
      if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return false;
    return true;
  }
  void quoted(const std::string& s) {
    line_ += '"';
    line_ += s;
    line_ += '"';
  }

  // A string as the serializer writes it: a plain one is copied as it is; anything else goes
  // through the serializer itself.
  void str(const std::string& s) {
    if (plain(s)) return quoted(s);
    scratch_ = s;
    out_json_.dump(scratch_, false, false, 0);
  }

  // A value as the serializer writes it. Scalars, nearly every traced value, are appended
  // here without the serializer's dispatch and its output adapter's virtual calls (issue 22);
  // floats (shortest round-trip digits, "null" for NaN and infinities) and composite values
  // go through the serializer.
  void value(const Event& v) {
    using T = nlohmann::json::value_t;
    switch (v.type()) {
      case T::null:
        line_ += "null";
        return;
      case T::boolean:
        line_ += v.get_ref<const bool&>() ? "true" : "false";
        return;
      case T::number_integer:
        return num(v.get_ref<const Event::number_integer_t&>());
      case T::number_unsigned:
        return num(v.get_ref<const Event::number_unsigned_t&>());
      case T::string: {
        const auto& s = v.get_ref<const std::string&>();
        if (plain(s)) return quoted(s);
        break;
      }
      default:
        break;
    }
    out_json_.dump(v, false, false, 0);
  }

  void params(const std::vector<Param>& ps) {
    line_ += '[';
    bool first = true;
    for (const auto& p : ps) {
      if (!first) line_ += ',';
      first = false;
      line_ += "{\"name\":";
      str(p.name);
      line_ += ",\"type\":";
      str(p.type);
      line_ += ",\"value\":";
      value(p.value);
      line_ += '}';
    }
    line_ += ']';
  }

  void stack(const std::optional<Event>& st) {
    if (!st) return;
    line_ += ",\"stack\":";
    out_json_.dump(*st, false, false, 0);
  }

  void write() {
    line_.push_back('\n');
    std::fwrite(line_.data(), 1, line_.size(), out_);
  }

  std::FILE* out_;
  std::string line_;  // kept: its capacity serves the next line
  // Writes into line_; kept with it, so that a line does not set one up.
  nlohmann::detail::serializer<nlohmann::json> out_json_{
      nlohmann::detail::output_adapter<char, std::string>(line_), ' ', kReplace};
  Event scratch_;  // a string that needs escaping, as the serializer takes it
};

}  // namespace

std::unique_ptr<EventSink> make_json_lines_writer(std::FILE* out) {
  return std::make_unique<JsonLinesWriter>(out);
}

}  // namespace gotap
