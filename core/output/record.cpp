#include "core/output/record.h"
#include "core/output/writers.h"

#include <fstream>

namespace gotap {

std::unique_ptr<EventSink> make_record_writer(std::FILE* out, const Event& info) {
  auto w = make_json_lines_writer(out);
  Event header = {{"event", "record"}, {"format", "gotap-record"}, {"version", kRecordVersion}};
  if (info.is_object())
    for (auto& [k, v] : info.items()) header[k] = v;
  w->emit(header);
  return w;
}

bool json_nests_deeper_than(std::string_view s, int levels) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character, a quote included
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > levels) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

namespace {

Error too_deep(const std::string& path, size_t line) {
  return make_error("{}:{}: nests deeper than {} levels, which no gotap record does", path, line,
                    kMaxRecordNesting);
}

Result<Event> parse_header(const std::string& path, std::istream& in) {
  std::string line;
  if (!std::getline(in, line)) return make_error("{}: empty file, not a gotap record", path);
  if (json_nests_deeper_than(line, kMaxRecordNesting)) return too_deep(path, 1);
  auto header = Event::parse(line, nullptr, false);
  // The fields read here and by `gotap report` of the types gotap writes, or it is not a
  // record: a typed accessor would throw on another.
  auto typed = [&](const char* key, bool (Event::*is)() const noexcept) {
    auto it = header.find(key);
    return it == header.end() || ((*it).*is)();
  };
  if (header.is_discarded() || !header.is_object() || !typed("format", &Event::is_string) ||
      !typed("version", &Event::is_number_integer) || !typed("command", &Event::is_string) ||
      header.value("format", "") != "gotap-record")
    return make_error("{}: not a gotap record (made with --record FILE)", path);
  int version = header.value("version", 0);
  if (version == 1)
    return make_error(
        "{}: record version 1 holds values in a format where a struct field can pass for "
        "gotap's own marks; this gotap reads version {}: record it again",
        path, kRecordVersion);
  if (version < 1 || version > kRecordVersion)
    return make_error("{}: record version {} is newer than this gotap reads ({})", path, version,
                      kRecordVersion);
  return header;
}

}  // namespace

Result<Event> read_record_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno_error(ErrorKind::BadInput, "cannot read {}", path);
  return parse_header(path, in);
}

Result<void> replay_record(const std::string& path, EventSink& sink) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errno_error(ErrorKind::BadInput, "cannot read {}", path);
  return replay_record(path, in, sink);
}

Result<void> replay_record(const std::string& path, std::istream& in, EventSink& sink) {
  auto h = parse_header(path, in);
  if (!h) return h.error();
  std::string line;
  size_t n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    // Before parsing: the parser is iterative, but the views that render the event recurse.
    if (json_nests_deeper_than(line, kMaxRecordNesting)) return too_deep(path, n);
    auto ev = Event::parse(line, nullptr, false);
    if (ev.is_discarded() || !ev.is_object() || !ev.contains("event"))
      return make_error("{}:{}: not an event", path, n);
    // A field of another type than gotap writes (a count that is a string): the views read
    // fields with nlohmann's typed accessors, which throw.
    try {
      sink.emit(ev);
    } catch (const nlohmann::json::exception& e) {
      return make_error("{}:{}: not an event gotap wrote: {}", path, n, e.what());
    }
  }
  sink.flush();
  return {};
}

}  // namespace gotap
