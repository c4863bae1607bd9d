// Human-readable writer, uftrace/funclatency style. Everything the tracee, its binary or a
// record controls (strings, names) goes through printable(), quote_go_string or
// value_to_text (go_quote.h), so it cannot inject escape sequences.
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/events/typed_events.h"
#include "core/output/value_text.h"
#include "core/output/writers.h"
#include "core/why/why_tracker.h"

namespace gotap {

namespace {

// Names come from the binary, which an attacker may have built: keep them printable.
std::string safe_name(const Event& ev, const char* key) {
  if (!ev.contains(key) || !ev[key].is_string()) return "?";
  return printable(ev[key].get<std::string>());
}

// One argument or result in a call's list: "name=value", a blank or "~r0" name left out.
void param_text(std::string& out, const std::string& name, const Event* value) {
  if (!out.empty()) out += ", ";
  if (name == "...") {  // ArgInfo stopped: more arguments follow, not described
    out += "...";
    return;
  }
  if (!name.empty() && name[0] != '~') {
    append_printable(out, name);
    out += '=';
  }
  out += value ? value_to_text(*value) : "?";
}

// The event's list KEY (args, results), by reference: a copy of it per event costs more than
// the rest of the line.
std::string param_list(const Event& ev, const char* key) {
  std::string out;
  auto it = ev.find(key);
  if (it == ev.end() || !it->is_array()) return out;
  const Event& list = *it;
  for (const auto& p : list) {
    auto v = p.find("value");
    param_text(out, p.value("name", ""), v == p.end() ? nullptr : &*v);
  }
  return out;
}

// A typed call's list, appended to `out` as param_list gives it for the JSON object: a ", "
// after anything written so far (a value's text may be empty), the values in place.
void append_params(std::string& out, const std::vector<Param>& ps) {
  const size_t start = out.size();
  for (const auto& p : ps) {
    if (out.size() > start) out += ", ";
    if (std::string_view(p.name) == "...") {  // sizes first: no compare of every name
      out += "...";
      continue;
    }
    if (!p.name.empty() && p.name[0] != '~') {
      append_printable(out, p.name);
      out += '=';
    }
    append_value_text(out, p.value);
  }
}

class TextWriter : public EventSink {
 public:
  explicit TextWriter(std::FILE* out) : out_(out) {}

  ~TextWriter() override { print_counts(); }

  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    if (kind == "count") return count_line(ev);
    print_counts();
    if (kind == "entry" || kind == "return" || kind == "unfinished") return call_line(kind, ev);
    if (kind == "latency") return latency_block(ev);
    if (kind == "summary") return summary(ev);
    if (kind == "detached")
      return print(fmt::format(
          "# detached {}: its probes cost {}% of the program's CPU "
          "(budget {}%)\n",
          safe_name(ev, "func"), ev.value("overhead_pct", 0.0), ev.value("budget_pct", 0.0)));
    if (kind == "gstate" || kind == "gcreate" || kind == "gexit") return goroutine_line(kind, ev);
    print(ev.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + "\n");
  }
  void flush() override {
    print_counts();
    std::fflush(out_);
  }

 private:
  void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), out_); }

  void header(const char* h) {
    if (header_ == h) return;
    header_ = h;
    calls_header_ = h == kCallHeader;
    print(h);
  }

  std::string when(const Event& ev) {
    uint64_t ts = ev.value("ts_ns", uint64_t{0});
    if (!t0_) t0_ = ts;
    return fmt::format("{:>13.6f}", ts >= t0_ ? (ts - t0_) / 1e9 : 0.0);
  }

  void call_line(const std::string& kind, const Event& ev) {
    begin_call(ev.value("ts_ns", uint64_t{0}), ev.value("goid", kNoGoid),
               ev.value("tid", int64_t{0}));
    std::string fn = safe_name(ev, "func");
    if (kind == "entry") {
      // An inlined copy has no RET to probe: say so, or the missing return looks like a hang.
      std::string where = ev.contains("inlined_in")
                              ? " [inlined in " + safe_name(ev, "inlined_in") + "]"
                          : ev.value("inlined", false) ? " [inlined]"
                                                       : "";
      entry_text(fn, param_list(ev, "args"), where);
    } else if (kind == "return") {
      // No duration_ns: the entry was not seen (docs/json.md), not a call of no length.
      auto d = ev.find("duration_ns");
      return_text(fn, param_list(ev, "results"),
                  d == ev.end() ? std::nullopt
                                : std::optional<uint64_t>(ev.value("duration_ns", uint64_t{0})));
    } else {
      unfinished_text(fn, printable(ev.value("reason", std::string("never returned"))));
    }
    auto st = ev.find("stack");
    auto why = ev.find("why");
    end_call(st == ev.end() ? nullptr : &*st,
             why == ev.end() || kind != "return" ? nullptr : &*why);
  }

  // The call events straight from their structs: the same lines as call_line gives for
  // to_event(x) (test_call_lines.cpp), without building the JSON object, and written into
  // line_ as they go: no string per value, name or column (issue 22). call_line stays as it
  // was, the oracle of these.
  void emit_entry(const CallEntry& e) override {
    print_counts();
    typed_begin(e.ts_ns, e.goid, e.tid);
    line_ += "-> ";
    append_printable(line_, e.func);
    line_ += '(';
    append_params(line_, e.args);
    line_ += ')';
    if (e.inlined) {
      // An inlined copy has no RET to probe: say so, or the missing return looks like a hang.
      if (e.inlined_in.empty()) {
        line_ += " [inlined]";
      } else {
        line_ += " [inlined in ";
        append_printable(line_, e.inlined_in);
        line_ += ']';
      }
    }
    line_ += '\n';
    end_call(e.stack ? &*e.stack : nullptr);
  }
  void emit_return(const CallReturn& r) override {
    print_counts();
    typed_begin(r.ts_ns, r.goid, r.tid);
    line_ += "<- ";
    append_printable(line_, r.func);
    // " = " and the results, taken back when there are none (or they show as nothing).
    const size_t mark = line_.size();
    line_ += " = ";
    const size_t start = line_.size();
    append_params(line_, r.results);
    if (line_.size() == start) line_.resize(mark);
    line_ += "  (";
    // No duration_ns: the entry was not seen (docs/json.md), not a call of no length.
    if (r.duration_ns)
      append_duration(line_, *r.duration_ns);
    else
      line_ += "unmatched: its entry was not seen";
    line_ += ")\n";
    end_call(r.stack ? &*r.stack : nullptr, r.why ? &*r.why : nullptr);
  }
  void emit_unfinished(const CallUnfinished& u) override {
    print_counts();
    typed_begin(u.ts_ns, u.goid, u.tid);
    line_ += "<- ";
    append_printable(line_, u.func);
    line_ += "  (unfinished: ";
    if (u.reason.empty())
      line_ += "never returned";
    else
      append_printable(line_, u.reason);
    line_ += ")\n";
    end_call(nullptr);
  }

  // begin_call's columns, formatted by hand: fmt's float and padded formatting was a third of
  // a traced call's printing (issue 22).
  void typed_begin(uint64_t ts, int64_t goid, int64_t tid) {
    // The header is there already on every line but the first: no string compared per line.
    if (!calls_header_) header(kCallHeader);
    if (!t0_) t0_ = ts;
    line_.clear();
    append_seconds(line_, ts >= t0_ ? ts - t0_ : 0);
    line_ += ' ';
    if (goid == kNoGoid)
      line_ += "       -";
    else
      append_int_right(line_, goid, 8);
    line_ += ' ';
    append_int_right(line_, tid, 8);
    line_ += "  ";
  }

  // A call's line is built in line_ and written at once, with its stack frames.
  void begin_call(uint64_t ts, int64_t goid, int64_t tid) {
    header(kCallHeader);
    if (!t0_) t0_ = ts;
    line_.clear();
    fmt::format_to(std::back_inserter(line_), "{:>13.6f} {:>8} {:>8}  ",
                   ts >= t0_ ? (ts - t0_) / 1e9 : 0.0,
                   goid == kNoGoid ? std::string("-") : std::to_string(goid), tid);
  }
  void entry_text(const std::string& fn, const std::string& args, const std::string& where) {
    line_ += "-> ";
    line_ += fn;
    line_ += '(';
    line_ += args;
    line_ += ')';
    line_ += where;
    line_ += '\n';
  }
  void return_text(const std::string& fn, const std::string& res, std::optional<uint64_t> dur) {
    line_ += "<- ";
    line_ += fn;
    if (!res.empty()) {
      line_ += " = ";
      line_ += res;
    }
    line_ += "  (";
    line_ += dur ? format_duration(*dur) : "unmatched: its entry was not seen";
    line_ += ")\n";
  }
  void unfinished_text(const std::string& fn, const std::string& reason) {
    line_ += "<- ";
    line_ += fn;
    line_ += "  (unfinished: ";
    line_ += reason;
    line_ += ")\n";
  }
  void end_call(const Event* stack, const Event* why = nullptr) {
    // --why: where the call's time went, under its return (core/why/why_tracker.h).
    if (std::string text = why ? why::why_text(*why) : ""; !text.empty()) {
      line_.append(34, ' ');
      line_ += "why: ";
      append_printable(line_, text);
      line_ += '\n';
    }
    if (stack && stack->is_array())
      for (const auto& fr : *stack) {
        line_.append(34, ' ');
        stack_frame_text(line_, fr);
        line_ += '\n';
      }
    print(line_);
  }

  // "main.b (/src/main.go:122)", as a Go traceback places a frame (its call's line for a
  // caller), " [inlined]" after a frame of an inlined call.
  static void stack_frame_text(std::string& out, const Event& fr) {
    if (!fr.is_object()) {
      out += fr.is_string() ? printable(fr.get_ref<const std::string&>()) : value_to_text(fr);
      return;
    }
    auto func = fr.find("func");
    append_printable(out, func != fr.end() && func->is_string()
                              ? func->get_ref<const std::string&>()
                              : std::string("?"));
    auto file = fr.find("file");
    auto line = fr.find("line");
    if (file != fr.end() && file->is_string() && line != fr.end() && line->is_number_integer()) {
      out += " (";
      append_printable(out, file->get_ref<const std::string&>());
      fmt::format_to(std::back_inserter(out), ":{})", line->get<int64_t>());
    }
    if (fr.value("inlined", false)) out += " [inlined]";
  }

  // Counts come together at the end of a run: held until the next other event, so that the
  // column fits the longest name instead of a fixed width that long Go names overflow.
  void count_line(const Event& ev) {
    const uint64_t interval = ev.value("interval", uint64_t{0});
    if (interval != counts_interval_) print_counts();
    counts_interval_ = interval;
    if (interval) {
      interval_start_ = ev.value("start_ts_ns", uint64_t{0});
      interval_end_ = ev.value("end_ts_ns", uint64_t{0});
    }
    CountRow row{safe_name(ev, "func"), ev.value("count", uint64_t{0}), "-"};
    if (ev.contains("failed")) row.failed = std::to_string(ev.value("failed", uint64_t{0}));
    counts_.push_back(std::move(row));
    // count --all: the function's processes under it, indented ("  pid 4242 (calls)").
    auto procs = ev.find("processes");
    if (procs != ev.end() && procs->is_array())
      for (const auto& p : *procs) {
        if (!p.is_object()) continue;
        std::string comm = p.contains("comm") && p["comm"].is_string()
                               ? printable(p["comm"].get<std::string>())
                               : std::string("?");
        counts_.push_back({fmt::format("  pid {} ({})", p.value("pid", int64_t{0}), comm),
                           p.value("count", uint64_t{0}), ""});
      }
    if (ev.value("processes_lost", uint64_t{0}))
      counts_.push_back({"  (process not kept)", ev.value("processes_lost", uint64_t{0}), ""});
  }

  // Wide enough for the long names real programs have (closures of generic methods, 80 to 90
  // characters, line up), not for a generic instantiation of hundreds.
  static constexpr size_t kMaxCountNameWidth = 100;

  void print_counts() {
    if (counts_.empty()) return;
    size_t width = 4;
    // FAILED (calls whose error result was not nil) once any function has an error result;
    // "-" for those without one.
    bool failed = false;
    for (const auto& r : counts_) {
      // Up to a cap: one long generic name would otherwise pad every row to its length
      // (421 columns seen); a longer name runs past its column.
      width = std::max(width, std::min(r.name.size(), kMaxCountNameWidth));
      failed = failed || (r.failed != "-" && !r.failed.empty());
    }
    if (counts_interval_ || printed_interval_) {
      if (counts_interval_)
        interval_title(counts_interval_);
      else
        print("\n[total]\n");
      header_.clear();  // each interval's table has its header
    }
    header(failed ? fmt::format("{:<{}} {:>12} {:>12}\n", "FUNC", width, "COUNT", "FAILED").c_str()
                  : fmt::format("{:<{}} {:>12}\n", "FUNC", width, "COUNT").c_str());
    for (const auto& r : counts_)
      print(failed && !r.failed.empty()
                ? fmt::format("{:<{}} {:>12} {:>12}\n", r.name, width, r.count, r.failed)
                : fmt::format("{:<{}} {:>12}\n", r.name, width, r.count));
    counts_.clear();
  }

  // -i: "[interval 3, 1.000 s]" above each interval's rows; the run's totals come after the
  // last one, under "[total]". A latency block ends in a blank line already (`gap` false).
  void interval_title(uint64_t interval, bool gap = true) {
    printed_interval_ = true;
    print(fmt::format(
        "{}[interval {}, {:.3f} s]\n", gap ? "\n" : "", interval,
        (static_cast<double>(interval_end_) - static_cast<double>(interval_start_)) / 1e9));
  }

  void latency_block(const Event& ev) {
    const uint64_t interval = ev.value("interval", uint64_t{0});
    if (interval != latency_interval_) {
      if (interval) {
        interval_start_ = ev.value("start_ts_ns", uint64_t{0});
        interval_end_ = ev.value("end_ts_ns", uint64_t{0});
        interval_title(interval, latency_interval_ == 0);
      } else if (printed_interval_) {
        print("[total]\n");
      }
      latency_interval_ = interval;
    }
    const std::string failed =
        ev.contains("failed") ? fmt::format("  failed {}", ev.value("failed", uint64_t{0})) : "";
    print(fmt::format("{}: count {}{}  min {}  p50 {}  p90 {}  p99 {}  max {}\n",
                      safe_name(ev, "func"), ev.value("count", uint64_t{0}), failed,
                      format_duration(ev.value("min_ns", uint64_t{0})),
                      format_duration(ev.value("p50_ns", uint64_t{0})),
                      format_duration(ev.value("p90_ns", uint64_t{0})),
                      format_duration(ev.value("p99_ns", uint64_t{0})),
                      format_duration(ev.value("max_ns", uint64_t{0}))));
    // latency --why: where the calls' time went, all of them and the slowest 1%.
    for (auto [key, title] :
         {std::pair{"why", "why"}, std::pair{"why_slowest", "why (slowest 1%)"}})
      if (auto w = ev.find(key); w != ev.end())
        if (std::string text = why::why_text(*w); !text.empty())
          print("  " + std::string(title) + ": " + printable(text) + "\n");
    if (!ev.contains("buckets")) return;
    uint64_t top = 1;
    for (const auto& b : ev["buckets"]) top = std::max(top, b.value("count", uint64_t{0}));
    print(fmt::format("{:>26}  : {:<10} {}\n", "range", "count", "distribution"));
    for (const auto& b : ev["buckets"]) {
      uint64_t c = b.value("count", uint64_t{0});
      int bar = static_cast<int>(c * 40 / top);
      print(fmt::format("{:>11} -> {:<11} : {:<10} |{:<40}|\n",
                        format_duration(b.value("lo_ns", uint64_t{0})),
                        format_duration(b.value("hi_ns", uint64_t{0})), c, std::string(bar, '*')));
    }
    print("\n");
  }

  void goroutine_line(const std::string& kind, const Event& ev) {
    header("#     TIME(s)     GOID  TRANSITION\n");
    std::string what;
    if (kind == "gstate")
      what = printable(ev.value("from", std::string("?"))) + " -> " +
             printable(ev.value("to", std::string("?")));
    else if (kind == "gcreate")
      what = fmt::format("created by goroutine {}", ev.value("parent_goid", int64_t{0}));
    else
      what = "exited";
    print(fmt::format("{} {:>8}  {}\n", when(ev), ev.value("goid", int64_t{0}), what));
  }

  void summary(const Event& ev) {
    std::string extra;
    for (auto it = ev.begin(); it != ev.end(); ++it) {
      if (it.key() == "event" || it.key() == "backend" || it.key() == "probes" ||
          it.key() == "events" || it.key() == "lost" || it.key() == "ts_ns")
        continue;
      extra += " " + printable(it.key()) + "=" +
               it.value().dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    }
    print(fmt::format("# {} events, {} lost, {} probes, backend {}{}\n",
                      ev.value("events", uint64_t{0}), ev.value("lost", uint64_t{0}),
                      ev.value("probes", uint64_t{0}),
                      printable(ev.value("backend", std::string("?"))), extra));
  }

  std::FILE* out_;
  struct CountRow {
    std::string name;
    uint64_t count = 0;
    std::string failed;  // "-": the function has no error result; "": a process's row
  };
  std::vector<CountRow> counts_;
  // -i: the interval of the rows held, or of the latency blocks printed last (0: the totals).
  uint64_t counts_interval_ = 0, latency_interval_ = 0;
  uint64_t interval_start_ = 0, interval_end_ = 0;
  bool printed_interval_ = false;
  std::string header_;
  static constexpr const char* kCallHeader = "#     TIME(s)     GOID      TID  CALL\n";
  bool calls_header_ = false;  // header_ is kCallHeader
  uint64_t t0_ = 0;
  std::string line_;  // kept: its capacity serves the next line
};

}  // namespace

std::unique_ptr<EventSink> make_text_writer(std::FILE* out) {
  return std::make_unique<TextWriter>(out);
}

}  // namespace gotap
