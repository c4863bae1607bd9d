#include "backends/trampoline/trace_reader.h"

#include <cstring>

namespace gotap::trampoline {

TraceReader::TraceReader(const ProbePlan& plan, const TraceSites& sites, uint64_t bias, int pid,
                         int max_str, EventSink& sink, uint32_t rate_per_s)
    : plan_(plan),
      sites_(sites),
      pid_(pid),
      sink_(sink),
      calls_(plan.funcs.size()),
      rate_(rate_per_s, plan.funcs.size()) {
  const BinaryView& bin = plan.binary_view;
  auto func_name = [&bin, bias](uint64_t pc) {
    return pc >= bias ? bin.func_name(pc - bias) : std::string();
  };
  decoder_ = std::make_unique<ebpf::EventDecoder>(sites.cfg, bin.types, bin.elf, bin.rt, bias,
                                                  max_str, func_name);
}

TraceReader::~TraceReader() = default;

size_t TraceReader::drain(uint8_t* ring) {
  return reader_.drain(ring, [this](const uint8_t* r) { add(r); });
}

size_t TraceReader::finish(uint8_t* ring) {
  return reader_.finish(ring, [this](const uint8_t* r) { add(r); });
}

void TraceReader::add(const uint8_t* record) {
  RingRecord r;
  std::memcpy(&r, record, sizeof r);
  const uint32_t patch = r.id >> 1;
  if (patch >= sites_.probe.size()) return;
  const int func = static_cast<int>(sites_.cfg.sites[sites_.probe[patch]].func_id);
  const CallKey key{r.goid, r.depth};
  const uint64_t ts = clock_.at(r.tsc);
  std::optional<uint64_t> duration;
  bool reported = true;
  if (!(r.id & 1)) {
    // A call left open at the same depth of the same goroutine is over (a panic unwound it).
    if (auto it = open_.find(key); it != open_.end() && it->second.reported) {
      CallUnfinished u(CallSite{ts, pid_, int(it->second.tid), int64_t(r.goid),
                                plan_.funcs[it->second.func].name},
                       it->second.ts);
      sink_.emit_unfinished(u);
      ++events_;
    }
    uint32_t tid = 0;
    std::memcpy(&tid, record + kTraceTid, 4);
    reported = rate_.allow(size_t(func), ts);
    open_[key] = Open{func, r.tsc, tid, ts, reported};
    ++calls_[func];
  } else if (auto it = open_.find(key); it != open_.end() && it->second.func == func) {
    duration = clock_.ns(r.tsc > it->second.tsc ? r.tsc - it->second.tsc : 0);
    reported = it->second.reported;
    open_.erase(it);
  } else {
    ++unmatched_;
    reported = rate_.allow(size_t(func), ts);
  }
  if (!reported) return;
  const size_t size = to_ebpf_event(record, sites_, patch, pid_, ts, duration, *ev_);
  switch (decoder_->decode_call(ev_.get(), size)) {
    case ebpf::EventDecoder::Kind::Entry:
      sink_.emit_entry(decoder_->entry());
      ++events_;
      break;
    case ebpf::EventDecoder::Kind::Return:
      sink_.emit_return(decoder_->ret());
      ++events_;
      break;
    case ebpf::EventDecoder::Kind::None:
      break;
  }
}

std::vector<CallUnfinished> TraceReader::open_calls(uint64_t now_ns) const {
  std::vector<CallUnfinished> out;
  for (const auto& [k, o] : open_)
    if (o.reported)
      out.emplace_back(
          CallSite{now_ns, pid_, int(o.tid), int64_t(k.goid), plan_.funcs[o.func].name}, o.ts);
  return out;
}

}  // namespace gotap::trampoline
