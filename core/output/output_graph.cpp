// The call graph view (`gotap graph`, `--format graph`), uftrace style: per goroutine, one
// line per traced call, callees indented under their caller, the duration on the line that
// ends the call.
#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/events/call_tree.h"
#include "core/output/output_views.h"
#include "core/output/value_text.h"

namespace gotap {

namespace {

class GraphWriter : public EventSink {
 public:
  GraphWriter(std::FILE* out, std::string root, bool args, const ViewOptions& v)
      : out_(out), root_(std::move(root)), args_(args), tree_(CallTree::Options{v.why}) {}

  void emit(const Event& ev) override {
    if (ev.value("event", "") != "summary") return tree_.add(ev);
    render(tree_.finish());
    print(fmt::format("# {} calls shown, {} lost, backend {}\n", shown_, ev.value("lost", 0),
                      printable(ev.value("backend", ""))));
    std::fflush(out_);
  }
  void flush() override { std::fflush(out_); }

 private:
  void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), out_); }

  // Where the call tree starts for this span: the depth of the outermost root call in its
  // stack (or the span itself), or -1 when it does not run beneath a root call.
  int base_depth(const CallSpan& s) const {
    if (root_.empty()) return 0;
    for (size_t i = 0; i < s.stack.size(); ++i)
      if (s.stack[i] == root_) return static_cast<int>(i);
    return s.func == root_ ? static_cast<int>(s.stack.size()) : -1;
  }

  std::string call_text(const CallSpan& s) const {
    if (s.wait) return printable(s.func);
    std::string a;
    if (args_ && s.args.is_array()) {
      for (const auto& p : s.args) {
        if (!a.empty()) a += ", ";
        std::string name = p.value("name", "");
        if (!name.empty() && name[0] != '~') a += printable(name) + "=";
        a += p.contains("value") ? value_to_text(p["value"]) : "?";
      }
    }
    return printable(s.func) + "(" + a + ")";
  }

  // --why: where a wait parked and who ended it, as trace --why's line says it.
  static std::string waker_text(const CallSpan& s) {
    if (s.off_cpu != OffCpu::Waiting || (!s.woken_by && s.parked_at.empty())) return "";
    std::string t;
    if (!s.parked_at.empty()) t += " at " + printable(s.parked_at);
    if (s.woken_by) {
      if (!t.empty()) t += ",";
      if (s.woken_by->goid > 0)
        t += fmt::format(" woken by {} [g {}]",
                         s.woken_by->func.empty() ? "?" : printable(s.woken_by->func),
                         s.woken_by->goid);
      else
        t += s.detail == "IO wait" ? " woken by the network poller" : " woken by a timer";
    }
    return " /*" + t + " */";
  }

  void line(const std::string& dur, int64_t goid, int indent, const std::string& text) {
    // A thread's calls (no goid: gccgo) read "t" and its id.
    const std::string who = goid < 0 ? fmt::format("t{}", -goid) : std::to_string(goid);
    print(fmt::format("{:>12} [{:>6}] | {}{}\n", dur, who, std::string(2 * indent, ' '), text));
  }

  void render(const std::vector<CallSpan>& spans) {
    print(fmt::format("# {:>10} [{:>6}] | FUNCTION\n", "DURATION", "GOID"));
    // Keep the calls beneath a root call; spans come per goroutine in start order, outer
    // calls first, so a call's callees follow it directly.
    std::vector<std::pair<const CallSpan*, int>> kept;  // span, its indent
    for (const auto& s : spans) {
      int base = base_depth(s);
      if (base >= 0) kept.push_back({&s, static_cast<int>(s.stack.size()) - base});
    }
    std::vector<std::pair<const CallSpan*, int>> open;
    int64_t goid = INT64_MIN;
    auto close_to = [&](int indent) {
      while (!open.empty() && open.back().second >= indent) {
        const CallSpan& c = *open.back().first;
        line(format_duration(c.end_ns - c.start_ns), c.goid, open.back().second,
             fmt::format("}} /* {}{} */", printable(c.func), c.finished ? "" : ": unfinished"));
        open.pop_back();
      }
    };
    for (size_t i = 0; i < kept.size(); ++i) {
      const auto& [s, indent] = kept[i];
      if (s->goid != goid) {
        close_to(0);
        if (goid != INT64_MIN) print("\n");
        goid = s->goid;
      }
      close_to(indent);
      shown_ += !s->wait;
      const bool parent = i + 1 < kept.size() && kept[i + 1].first->goid == s->goid &&
                          kept[i + 1].second == indent + 1;
      if (s->instant) {
        line("", s->goid, indent, call_text(*s) + "; /* inlined */");
      } else if (parent) {
        line("", s->goid, indent, call_text(*s) + " {");
        open.push_back(kept[i]);
      } else {
        line(format_duration(s->end_ns - s->start_ns), s->goid, indent,
             call_text(*s) + (s->finished ? ";" : "; /* unfinished */") + waker_text(*s));
      }
    }
    close_to(0);
  }

  std::FILE* out_;
  std::string root_;
  bool args_;
  CallTree tree_;
  size_t shown_ = 0;
};

}  // namespace

std::unique_ptr<EventSink> make_graph_writer(std::FILE* out, const std::string& root,
                                             bool show_args, const ViewOptions& v) {
  return std::make_unique<GraphWriter>(out, root, show_args, v);
}

}  // namespace gotap
