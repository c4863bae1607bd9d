// `gotap report FILE`: renders a trace recorded with --record in any output format, with
// the same writers a live run uses, so the output is the same.
#include <cstdio>
#include <iostream>
#include <memory>

#include "core/output/goroutine_views.h"
#include "core/output/output_views.h"
#include "core/output/record.h"
#include "frontends/commands.h"
#include "frontends/options.h"

namespace gotap::cli {

int cmd_report(const Args& args) {
  po::options_description desc("gotap report [--format FORMAT] [-o FILE] RECORD");
  desc.add_options()("help,h", "show this help")(
      "format", po::value<std::string>(),
      "text (the default; a goroutines record: goroutines), json, latency, graph, perfetto, "
      "folded, svg or goroutines")("json", "same as --format json")(
      "args", "graph: show each call's arguments")("output,o", po::value<std::string>(),
                                                   "write there instead of stdout");
  auto vm = parse_options(args, desc, "files");
  if (!vm) return report_error(vm.error());
  if (vm->count("help")) {
    std::cout << desc;
    return 0;
  }
  auto files = positionals(*vm, "files");
  if (files.size() != 1) return usage_error("report needs exactly one RECORD file");
  auto header = read_record_header(files[0]);
  if (!header) return report_error(header.error());
  // A record of `gotap goroutines` reads best as its table, as it was shown live.
  std::string format = header->value("command", "") == "goroutines" ? "goroutines" : "text";
  if (vm->count("format")) format = (*vm)["format"].as<std::string>();
  if (vm->count("json")) format = "json";
  if (!is_output_format(format))
    return usage_error("unknown --format '" + format + "' (" + kOutputFormats + ")");
  auto out = open_output(*vm, "output", stdout);
  if (!out) return report_error(out.error());
  // A graph recorded by `gotap graph ROOT` is drawn beneath ROOT again.
  std::string root;
  if (header->value("command", "") == "graph" && (*header)["patterns"].is_array() &&
      !(*header)["patterns"].empty() && (*header)["patterns"][0].is_string())
    root = (*header)["patterns"][0].get<std::string>();
  // A record made with --why (a header field since it came; older records have none).
  const auto flag = [&](const char* key, bool dflt) {
    const auto it = header->find(key);
    return it != header->end() && it->is_boolean() ? it->get<bool>() : dflt;
  };
  const ViewOptions view{.why = flag("why", false),
                         .all_goroutine_events = flag("goroutines", true)};
  std::unique_ptr<EventSink> sink =
      format == "graph" ? make_graph_writer(out->fp, root, vm->count("args") > 0, view)
                        : make_output(format, out->fp, view);
  // Its status changes inside traced calls are there for the views that draw them; the
  // others show what the live run showed, without them.
  if (!view.all_goroutine_events && !draws_call_states(format))
    sink = make_goroutine_event_drop(std::move(sink));
  // The kernel's intervals (`kwhy`, --why) and a held call's changes replayed after its
  // entry are for the views that draw them, whatever else the record holds.
  else if (!draws_call_states(format))
    sink = make_view_only_drop(std::move(sink));
  if (auto r = replay_record(files[0], *sink); !r) return report_error(r.error());
  return 0;
}

}  // namespace gotap::cli
