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

namespace {

Result<Event> parse_header(const std::string& path, std::istream& in) {
  std::string line;
  if (!std::getline(in, line)) return make_error("{}: empty file, not a gotap record", path);
  auto header = Event::parse(line, nullptr, false);
  if (header.is_discarded() || !header.is_object() || header.value("format", "") != "gotap-record")
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
  auto h = parse_header(path, in);
  if (!h) return h.error();
  std::string line;
  size_t n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto ev = Event::parse(line, nullptr, false);
    if (ev.is_discarded() || !ev.is_object() || !ev.contains("event"))
      return make_error("{}:{}: not an event", path, n);
    sink.emit(ev);
  }
  sink.flush();
  return {};
}

}  // namespace gotap
