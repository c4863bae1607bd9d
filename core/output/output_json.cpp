// JSON Lines writer: one event per line, exactly the objects the backends emit.
#include <cstdio>
#include <string>

#include "core/output/writers.h"

namespace gotap {

namespace {

class JsonLinesWriter : public EventSink {
 public:
  explicit JsonLinesWriter(std::FILE* out) : out_(out) {}
  void emit(const Event& ev) override {
    // Invalid UTF-8 from the tracee must not abort the dump: escape it instead (docs/json.md:
    // invalid bytes appear as \u00XX).
    constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
    // One serializer writes the whole line into one buffer: a serializer per key and value,
    // and the strings they returned, were most of the ptrace backend's CPU per hit (issue 22).
    line_.clear();
    nlohmann::detail::serializer<nlohmann::json> out(
        nlohmann::detail::output_adapter<char, std::string>(line_), ' ', kReplace);
    auto kind = ev.find("event");
    if (ev.is_object() && kind != ev.end()) {
      // "event" first, as in docs/json.md, so a reader sees what a line is at its start.
      line_ += "{\"event\":";
      out.dump(*kind, false, false, 0);
      for (auto it = ev.begin(); it != ev.end(); ++it) {
        if (it == kind) continue;
        line_ += ',';
        out.dump(nlohmann::json(it.key()), false, false, 0);
        line_ += ':';
        out.dump(it.value(), false, false, 0);
      }
      line_ += '}';
    } else {
      out.dump(ev, false, false, 0);
    }
    line_.push_back('\n');
    std::fwrite(line_.data(), 1, line_.size(), out_);
  }
  void flush() override { std::fflush(out_); }

 private:
  std::FILE* out_;
  std::string line_;  // kept: its capacity serves the next line
};

}  // namespace

std::unique_ptr<EventSink> make_json_lines_writer(std::FILE* out) {
  return std::make_unique<JsonLinesWriter>(out);
}

}  // namespace gotap
