#include "core/output/output_views.h"
#include "core/output/writers.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/events/call_tree.h"
#include "core/events/typed_events.h"
#include "core/model/go_quote.h"
#include "core/model/json_utf8.h"
#include "core/output/goroutine_views.h"

namespace gotap {

namespace {

// Collects calls until the summary, then renders them all.
class WholeTraceWriter : public EventSink {
 public:
  WholeTraceWriter(std::FILE* out, const ViewOptions& v)
      : out_(out), view_(v), tree_(CallTree::Options{v.why}) {}
  void emit(const Event& ev) override {
    if (ev.value("event", "") == "summary") {
      render(tree_.finish(), ev);
      std::fflush(out_);
      return;
    }
    if (!pid_ && ev.contains("pid")) pid_ = ev.value("pid", int64_t{0});
    tree_.add(ev);
  }
  void flush() override { std::fflush(out_); }

 protected:
  virtual void render(const std::vector<CallSpan>& spans, const Event& summary) = 0;
  void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), out_); }
  std::FILE* out_;
  ViewOptions view_;
  int64_t pid_ = 0;

 private:
  CallTree tree_;
};

class PerfettoWriter : public WholeTraceWriter {
 public:
  using WholeTraceWriter::WholeTraceWriter;

  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    if (kind == "gstate" || kind == "gexit" || kind == "gcreate") {
      const int64_t goid = ev.value("goid", int64_t{0});
      const uint64_t ts = ev.value("ts_ns", uint64_t{0});
      last_ts_ = std::max(last_ts_, ts);
      if (ev.contains("func")) names_[goid] = ev.value("func", "");  // gcreate, first gstate
      // Only a goroutine's whole life makes its track: the changes inside traced calls
      // alone (--why) would leave a state open across the time outside them. A held call's
      // changes given again after its entry (`replayed`) are on the track already.
      if (kind != "gcreate" && view_.all_goroutine_events && !ev.value("replayed", false)) {
        close_state(goid, ts);
        if (kind == "gstate" && ev.value("to", "") != "dead")
          open_[goid] = {goid, ev.value("to", "?"), ts, ts};
      }
    }
    WholeTraceWriter::emit(ev);
  }

 private:
  struct StateSpan {
    int64_t goid;
    std::string state;
    uint64_t start_ns, end_ns;
  };
  void close_state(int64_t goid, uint64_t ts) {
    auto it = open_.find(goid);
    if (it == open_.end()) return;
    it->second.end_ns = std::max(ts, it->second.start_ns);
    states_.push_back(it->second);
    open_.erase(it);
  }

  // Goroutine states go on tracks of their own, in a second process: a state span does not
  // nest with the calls (a call can block), and each track's slices must.
  void render_states(Event& events) {
    for (auto it = open_.begin(); it != open_.end();) close_state((it++)->first, last_ts_);
    if (states_.empty()) return;
    std::stable_sort(states_.begin(), states_.end(), [](const auto& a, const auto& b) {
      return a.goid != b.goid ? a.goid < b.goid : a.start_ns < b.start_ns;
    });
    const int64_t spid = pid_ + (int64_t{1} << 22);  // above any Linux pid
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", spid},
                      {"args", {{"name", "goroutine states"}}}});
    int64_t last_goid = -1;
    for (const auto& s : states_) {
      if (s.goid != last_goid) {
        last_goid = s.goid;
        std::string name = fmt::format("goroutine {}", s.goid);
        if (auto n = names_.find(s.goid); n != names_.end() && !n->second.empty())
          name += " " + n->second;
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", spid},
                          {"tid", s.goid},
                          {"args", {{"name", name}}}});
      }
      events.push_back({{"name", s.state},
                        {"cat", "state"},
                        {"ph", "X"},
                        {"pid", spid},
                        {"tid", s.goid},
                        {"ts", static_cast<double>(s.start_ns) / 1e3},
                        {"dur", static_cast<double>(s.end_ns - s.start_ns) / 1e3}});
    }
  }

  void render(const std::vector<CallSpan>& spans, const Event& summary) override {
    Event events = Event::array();
    events.push_back(
        {{"ph", "M"},
         {"name", "process_name"},
         {"pid", pid_},
         {"args", {{"name", fmt::format("gotap ({})", summary.value("backend", ""))}}}});
    render_states(events);
    int64_t last_goid = -1;
    std::set<int64_t> named;                // goroutines whose call track has its name
    std::map<int64_t, std::string> wakers;  // goid -> its frame at a wake-up
    int64_t flow = 0;
    for (const auto& s : spans) {
      // A span without a goroutine (gccgo) is its thread's: CallSpan::goid is minus its id.
      const int64_t track = s.goid < 0 ? -s.goid : s.goid;
      if (s.goid != last_goid) {
        last_goid = s.goid;
        named.insert(s.goid);
        events.push_back(
            {{"ph", "M"},
             {"name", "thread_name"},
             {"pid", pid_},
             {"tid", track},
             {"args",
              {{"name", fmt::format("{} {}", s.goid < 0 ? "thread" : "goroutine", track)}}}});
      }
      Event e = {{"name", s.func},
                 {"cat", category(s)},
                 {"pid", pid_},
                 {"tid", track},
                 {"ts", static_cast<double>(s.start_ns) / 1e3}};
      if (s.instant) {
        e["ph"] = "i";
        e["s"] = "t";
      } else {
        e["ph"] = "X";
        e["dur"] = static_cast<double>(s.end_ns - s.start_ns) / 1e3;
      }
      Event args = Event::object();
      if (s.args.is_array())
        for (const auto& a : s.args)
          if (a.contains("name") && a["name"].is_string() && a.contains("value"))
            args[a["name"].get<std::string>()] =
                value_json_is_safe(a["value"]) ? a["value"] : value_json_safe(a["value"]);
      if (!s.finished && !s.instant) args["unfinished"] = true;
      if (s.off_cpu == OffCpu::Waiting) {
        if (!s.parked_at.empty()) args["parked_at"] = s.parked_at;
        if (s.woken_by) args["woken_by"] = woken_json(*s.woken_by, s.detail);
      }
      // The goroutine that ended the wait before this stretch: an arrow from it, at the
      // wake-up, to here (Perfetto's flow events of version 2, bound to both slices).
      if (s.off_cpu == OffCpu::Runnable && s.woken_by && s.woken_by->goid > 0 &&
          s.woken_by->goid != s.goid) {
        e["bind_id"] = ++flow;
        e["flow_in"] = true;
        args["woken_by"] = woken_json(*s.woken_by, "");
        events.push_back({{"name", fmt::format("wakes goroutine {}", s.goid)},
                          {"cat", "wake"},
                          {"ph", "X"},
                          {"pid", pid_},
                          {"tid", s.woken_by->goid},
                          {"ts", static_cast<double>(s.start_ns) / 1e3},
                          {"dur", 0},
                          {"bind_id", flow},
                          {"flow_out", true}});
        wakers[s.woken_by->goid] = s.woken_by->func;
      }
      if (!args.empty()) e["args"] = std::move(args);
      events.push_back(std::move(e));
    }
    // A waker with no traced call has a track for its wake-ups alone.
    for (const auto& [goid, func] : wakers) {
      if (!named.insert(goid).second) continue;
      std::string name = fmt::format("goroutine {}", goid);
      if (auto n = names_.find(goid); n != names_.end() && !n->second.empty())
        name += " " + n->second;
      else if (!func.empty())
        name += " " + func;
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", pid_},
                        {"tid", goid},
                        {"args", {{"name", name}}}});
    }
    Event doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
    // ASCII only: a name's bidi override or control byte stays an escape should the JSON be
    // shown on a terminal, and invalid UTF-8 is replaced rather than thrown on.
    print(doc.dump(-1, ' ', true, Event::error_handler_t::replace) + "\n");
  }

  static const char* category(const CallSpan& s) {
    switch (s.off_cpu) {
      case OffCpu::Waiting:
        return "wait";
      case OffCpu::Runnable:
        return "runnable";
      case OffCpu::Syscall:
        return "syscall";
      case OffCpu::Preempted:
        return "preempted";
      case OffCpu::None:
        break;
    }
    return s.instant ? "inlined" : "call";
  }
  // As the `why` of json.md names a waker.
  static Event woken_json(const Waker& w, const std::string& reason) {
    if (w.goid <= 0) return {{"by", reason == "IO wait" ? "netpoll" : "timer"}};
    Event e = {{"goid", w.goid}};
    if (!w.func.empty()) e["func"] = w.func;
    return e;
  }

  std::map<int64_t, StateSpan> open_;
  std::vector<StateSpan> states_;
  std::map<int64_t, std::string> names_;  // start functions
  uint64_t last_ts_ = 0;
};

// Self time per distinct stack of traced calls, the input of every flame graph tool. Each
// name is printable() (go_quote.h): a frame's text is what the text view shows for it.
std::map<std::string, uint64_t> folded_stacks(const std::vector<CallSpan>& spans) {
  std::map<std::string, int64_t> self;
  auto join = [](const std::vector<std::string>& v, size_t n) {
    std::string k;
    for (size_t i = 0; i < n; ++i) {
      if (i) k += ';';
      append_printable(k, v[i]);
    }
    return k;
  };
  for (const auto& s : spans) {
    if (s.instant) continue;
    auto dur = static_cast<int64_t>(s.end_ns - s.start_ns);
    std::vector<std::string> path = s.stack;
    path.push_back(s.func);
    self[join(path, path.size())] += dur;
    if (!s.stack.empty()) self[join(s.stack, s.stack.size())] -= dur;
  }
  std::map<std::string, uint64_t> out;
  for (const auto& [k, v] : self)
    if (v > 0) out[k] = static_cast<uint64_t>(v);
  return out;
}

class FoldedWriter : public WholeTraceWriter {
 public:
  using WholeTraceWriter::WholeTraceWriter;

 private:
  void render(const std::vector<CallSpan>& spans, const Event&) override {
    for (const auto& [stack, ns] : folded_stacks(spans)) print(fmt::format("{} {}\n", stack, ns));
  }
};

std::string xml_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (c < 0x20 && c != '\t')
          o += "?";
        else
          o += static_cast<char>(c);
    }
  }
  return o;
}

struct FlameNode {
  std::string name;
  uint64_t total = 0;
  std::map<std::string, FlameNode> children;
};

class SvgWriter : public WholeTraceWriter {
 public:
  SvgWriter(std::FILE* out, std::string title, const ViewOptions& v)
      : WholeTraceWriter(out, v), title_(std::move(title)) {}

 private:
  static constexpr double kWidth = 1200, kRow = 18, kPad = 10;

  void render(const std::vector<CallSpan>& spans, const Event&) override {
    FlameNode root{"all", 0, {}};
    int depth = 0;
    for (const auto& [stack, ns] : folded_stacks(spans)) {
      FlameNode* n = &root;
      n->total += ns;
      int d = 0;
      size_t start = 0;
      while (start <= stack.size()) {
        size_t end = stack.find(';', start);
        std::string part =
            stack.substr(start, end == std::string::npos ? std::string::npos : end - start);
        FlameNode& c = n->children[part];
        c.name = part;
        c.total += ns;
        n = &c;
        ++d;
        if (end == std::string::npos) break;
        start = end + 1;
      }
      depth = std::max(depth, d);
    }
    const double height = (depth + 1) * kRow + 3 * kPad + kRow;
    print(fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
        "viewBox=\"0 0 {} {}\" font-family=\"monospace\" font-size=\"12\">\n"
        "<rect width=\"100%\" height=\"100%\" fill=\"#fdfdf6\"/>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"14\">{}</text>\n",
        kWidth + 2 * kPad, height, kWidth + 2 * kPad, height, kPad, kPad + 12, xml_escape(title_)));
    if (root.total > 0) draw(root, kPad, kPad * 2 + kRow, kWidth, root.total);
    print("</svg>\n");
  }

  // Icicle layout: the root on top, callees below their callers, widths by time.
  void draw(const FlameNode& n, double x, double y, double w, uint64_t all) {
    uint32_t h = 2166136261u;
    for (char c : n.name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
    std::string fill =
        fmt::format("rgb({},{},{})", 205 + h % 50, 80 + (h >> 8) % 120, 40 + (h >> 16) % 50);
    print(fmt::format(
        "<g><title>{} ({:.3f} ms, {:.2f}%)</title><rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" "
        "height=\"{}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.5\"/>",
        xml_escape(n.name), n.total / 1e6, 100.0 * n.total / all, x, y, w, kRow - 1, fill));
    if (w > 30) {
      size_t fit = static_cast<size_t>((w - 6) / 7.2);
      std::string label = n.name;
      if (label.size() > fit) {
        // Cut on a character's first byte: half a UTF-8 sequence is not XML.
        size_t cut = fit > 2 ? fit - 2 : 0;
        while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;
        label = label.substr(0, cut) + "..";
      }
      print(fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\">{}</text>", x + 3, y + kRow - 5,
                        xml_escape(label)));
    }
    print("</g>\n");
    double cx = x;
    for (const auto& [name, c] : n.children) {
      double cw = w * static_cast<double>(c.total) / static_cast<double>(n.total);
      if (cw >= 0.1) draw(c, cx, y + kRow, cw, all);
      cx += cw;
    }
  }
  std::string title_;
};

class LatencyView : public EventSink {
 public:
  explicit LatencyView(std::unique_ptr<EventSink> inner) : inner_(std::move(inner)) {}
  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    // Calls' durations only: goroutine states (--goroutines) are not latencies, and would
    // print a line each before the histograms.
    if (kind == "entry" || kind == "unfinished" || kind == "gstate" || kind == "gcreate" ||
        kind == "gexit")
      return;
    if (kind == "return") {
      if (ev.contains("duration_ns"))
        durations_[ev.value("func", "")].add(ev["duration_ns"].get<uint64_t>());
      return;
    }
    if (kind == "summary")
      for (auto& [func, d] : durations_) inner_->emit(to_event(FuncLatency{func, d, std::nullopt}));
    inner_->emit(ev);
  }
  void flush() override { inner_->flush(); }

 private:
  std::unique_ptr<EventSink> inner_;
  std::map<std::string, LatencySummary> durations_;
};

class Tee : public EventSink {
 public:
  Tee(std::unique_ptr<EventSink> a, std::unique_ptr<EventSink> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  void emit(const Event& ev) override {
    a_->emit(ev);
    b_->emit(ev);
  }
  void emit_entry(const CallEntry& e) override {
    a_->emit_entry(e);
    b_->emit_entry(e);
  }
  void emit_return(const CallReturn& r) override {
    a_->emit_return(r);
    b_->emit_return(r);
  }
  void emit_unfinished(const CallUnfinished& u) override {
    a_->emit_unfinished(u);
    b_->emit_unfinished(u);
  }
  void flush() override {
    a_->flush();
    b_->flush();
  }

 private:
  std::unique_ptr<EventSink> a_, b_;
};

}  // namespace

std::unique_ptr<EventSink> make_perfetto_writer(std::FILE* out, const ViewOptions& v) {
  return std::make_unique<PerfettoWriter>(out, v);
}
std::unique_ptr<EventSink> make_folded_writer(std::FILE* out, const ViewOptions& v) {
  return std::make_unique<FoldedWriter>(out, v);
}
std::unique_ptr<EventSink> make_flamegraph_svg_writer(std::FILE* out, const std::string& title,
                                                      const ViewOptions& v) {
  return std::make_unique<SvgWriter>(out, title, v);
}
std::unique_ptr<EventSink> make_latency_view(std::unique_ptr<EventSink> inner) {
  return std::make_unique<LatencyView>(std::move(inner));
}
std::unique_ptr<EventSink> make_tee(std::unique_ptr<EventSink> a, std::unique_ptr<EventSink> b) {
  return std::make_unique<Tee>(std::move(a), std::move(b));
}

bool is_output_format(const std::string& f) {
  return f == "text" || f == "json" || f == "latency" || f == "graph" || f == "perfetto" ||
         f == "folded" || f == "svg" || f == "goroutines";
}

bool draws_call_states(const std::string& f) {
  return f == "graph" || f == "perfetto" || f == "folded" || f == "svg";
}

std::unique_ptr<EventSink> make_output(const std::string& f, std::FILE* out, const ViewOptions& v) {
  if (f == "json") return make_json_lines_writer(out);
  if (f == "latency") return make_latency_view(make_text_writer(out));
  if (f == "graph") return make_graph_writer(out, "", false, v);
  if (f == "perfetto") return make_perfetto_writer(out, v);
  if (f == "folded") return make_folded_writer(out, v);
  if (f == "svg")
    return make_flamegraph_svg_writer(
        out,
        v.why ? "gotap: time in traced calls, and where it went off the CPU"
              : "gotap: time in traced calls",
        v);
  if (f == "goroutines") return make_goroutine_table(out, isatty(fileno(out)) == 1);
  return make_text_writer(out);
}

}  // namespace gotap
