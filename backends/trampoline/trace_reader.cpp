#include "backends/trampoline/trace_reader.h"

#include <cstring>

#include <fmt/format.h>

namespace gotap::trampoline {

TraceReader::TraceReader(const ProbePlan& plan, const TraceSites& sites, uint64_t bias, int pid,
                         int max_str, EventSink& sink, uint32_t rate_per_s, ReturnFilter filter,
                         const cond::Condition* cond)
    : plan_(plan),
      sites_(sites),
      pid_(pid),
      sink_(sink),
      reader_(sites.shape),
      calls_(plan.funcs.size()),
      rate_(rate_per_s, plan.funcs.size()),
      filter_(filter) {
  const BinaryView& bin = plan.binary_view;
  auto func_name = [&bin, bias](uint64_t pc) {
    return pc >= bias ? bin.func_name(pc - bias) : std::string();
  };
  if (cond) cond_ = std::make_unique<RecordCondition>(*cond, bias);
  decoder_ = std::make_unique<ebpf::EventDecoder>(sites.cfg, bin.types, bin.elf, bin.rt, bias,
                                                  max_str, func_name);
  if (sites.stack_depth > 0) decoder_->set_stack(&bin, sites.stack_depth);
}

TraceReader::~TraceReader() = default;

size_t TraceReader::drain(uint8_t* ring) {
  ring_ = ring;
  return reader_.drain(ring, [this](const uint8_t* r) { add(r); });
}

size_t TraceReader::finish(uint8_t* ring) {
  ring_ = ring;
  return reader_.finish(ring, [this](const uint8_t* r) { add(r); });
}

std::string TraceReader::lost_return(uint64_t dropped) {
  if (!dropped) return "";
  return fmt::format("no return seen: the ring lost {} record{}, which may hold it", dropped,
                     dropped == 1 ? "" : "s");
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
  std::optional<CallEntry> held;
  bool reported = true;
  const bool conditioned = cond_ && cond_->on(size_t(func));
  // Decided at the return: the entry is held until then.
  const bool at_ret = filter_.active() || (conditioned && cond_->at_ret(size_t(func)));
  if (!(r.id & 1)) {
    // A call left open at the same depth of the same goroutine is over (a panic unwound it,
    // or its return was among the records lost so far, which its writer counted before this
    // later entry was written); a held one was never reported, and its return will not
    // decide it now.
    if (auto it = open_.find(key); it != open_.end() && it->second.reported && !it->second.at_ret) {
      CallUnfinished u(CallSite{ts, pid_, int(it->second.tid), int64_t(r.goid),
                                plan_.funcs[it->second.func].name},
                       it->second.ts);
      u.reason = lost_return(ring_ ? dropped(ring_) : 0);
      sink_.emit_unfinished(u);
      ++events_;
    }
    uint32_t tid = 0;
    std::memcpy(&tid, record + kTraceTid, 4);
    Open o{func, r.tsc, tid, ts, false, std::nullopt};
    o.at_ret = at_ret;
    if (conditioned)
      o.rejected = !cond_->run(size_t(func), false, record, sites_.captures[patch], int64_t(r.goid),
                               0, o.bits, o.vals);
    // Decided at the return, the call takes its --rate token once selected, there.
    o.reported = !o.rejected && (at_ret || rate_.allow(size_t(func), ts));
    reported = o.reported;
    if (!at_ret && !o.rejected) ++calls_[func];
    open_[key] = std::move(o);
  } else if (auto it = open_.find(key); it != open_.end() && it->second.func == func) {
    duration = clock_.ns(r.tsc > it->second.tsc ? r.tsc - it->second.tsc : 0);
    Open o = std::move(it->second);
    open_.erase(it);
    if (o.rejected) return;
    reported = o.reported;
    held = std::move(o.held);
    if (conditioned && o.at_ret &&
        !cond_->run(size_t(func), true, record, sites_.captures[patch], int64_t(r.goid), *duration,
                    o.bits, o.vals))
      return;
  } else {
    ++unmatched_;
    // Nothing to decide a filter or a condition on: neither a duration nor an entry.
    if (at_ret || conditioned) return;
    reported = rate_.allow(size_t(func), ts);
  }
  if (!reported) return;
  const size_t size = to_ebpf_event(record, sites_, patch, pid_, ts, duration, *ev_);
  switch (decoder_->decode_call(ev_.get(), size)) {
    case ebpf::EventDecoder::Kind::Entry:
      if (at_ret) {
        open_[key].held = decoder_->entry();
        break;
      }
      sink_.emit_entry(decoder_->entry());
      ++events_;
      break;
    case ebpf::EventDecoder::Kind::Return:
      if (at_ret) {
        if (filter_.active() && !selected(decoder_->ret(), duration)) break;
        if (!rate_.allow(size_t(func), ts)) break;
        ++calls_[func];
        if (held) {
          sink_.emit_entry(*held);
          ++events_;
        }
      }
      sink_.emit_return(decoder_->ret());
      ++events_;
      break;
    case ebpf::EventDecoder::Kind::None:
      break;
  }
}

bool TraceReader::selected(const CallReturn& r, std::optional<uint64_t> duration) const {
  if (filter_.slower_ns && !(duration && *duration > *filter_.slower_ns)) return false;
  if (!filter_.errors) return true;
  // The last result of type error, as --errors picks it (core/cond/compile.cpp): nil is a
  // null value (its type word was 0).
  for (auto it = r.results.rbegin(); it != r.results.rend(); ++it)
    if (it->type == "error") return !it->value.is_null();
  return false;
}

std::vector<CallUnfinished> TraceReader::open_calls(uint64_t now_ns) const {
  std::vector<CallUnfinished> out;
  for (const auto& [k, o] : open_)
    if (o.reported && !o.at_ret)
      out.emplace_back(
          CallSite{now_ns, pid_, int(o.tid), int64_t(k.goid), plan_.funcs[o.func].name}, o.ts);
  return out;
}

}  // namespace gotap::trampoline
