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
    std::string line;
    auto kind = ev.find("event");
    if (ev.is_object() && kind != ev.end()) {
      // "event" first, as in docs/json.md, so a reader sees what a line is at its start.
      line = "{\"event\":" + kind->dump(-1, ' ', false, kReplace);
      for (auto it = ev.begin(); it != ev.end(); ++it) {
        if (it == kind) continue;
        line += ',' + nlohmann::json(it.key()).dump(-1, ' ', false, kReplace) + ':' +
                it.value().dump(-1, ' ', false, kReplace);
      }
      line += '}';
    } else {
      line = ev.dump(-1, ' ', false, kReplace);
    }
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), out_);
  }
  void flush() override { std::fflush(out_); }

 private:
  std::FILE* out_;
};

}  // namespace

std::unique_ptr<EventSink> make_json_lines_writer(std::FILE* out) {
  return std::make_unique<JsonLinesWriter>(out);
}

}  // namespace gotap
