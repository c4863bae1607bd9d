#include "core/output/line_cap.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/events/typed_events.h"

namespace gotap {

namespace {

using nlohmann::json;

size_t size_of(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace).size();
}

// At least size_of(v), found without writing the JSON out: a string's byte may become a
// six-character escape, a number has at most 32 characters. Every event goes through the
// cap, and nearly all are far below it: this spares each one a full dump.
size_t size_bound(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return 2 + 6 * v.get_ref<const std::string&>().size();
    case json::value_t::array: {
      size_t n = 2;
      for (const auto& e : v) n += size_bound(e) + 1;
      return n;
    }
    case json::value_t::object: {
      size_t n = 2;
      for (const auto& [k, e] : v.items()) n += 2 + 6 * k.size() + 1 + size_bound(e) + 1;
      return n;
    }
    case json::value_t::binary:
      return size_of(v);
    default:
      return 32;
  }
}

// Whether the event may need cutting: it has values and may be larger than the cap.
bool may_exceed(const json& ev, size_t max_bytes) {
  if (!ev.is_object()) return false;
  if (!ev.contains("args") && !ev.contains("results")) return false;
  return size_bound(ev) > max_bytes && size_of(ev) > max_bytes;
}

// Cuts v to what `budget` bytes allow, spending them; returns whether anything was cut.
bool cut(json& v, long& budget);

// Keeps the elements of `list` that fit; returns whether some were left out.
bool cut_list(json& list, long& budget) {
  if (!list.is_array()) return false;
  bool any = false;
  size_t keep = 0;
  for (; keep < list.size(); ++keep) {
    if (budget <= 0) break;
    any |= cut(list[keep], budget);
  }
  if (keep < list.size()) {
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(keep), list.end());
    return true;
  }
  return any;
}

bool cut(json& v, long& budget) {
  if (v.is_array()) {
    // A plain array becomes the marked shape of one cut short (docs/json.md).
    const size_t len = v.size();
    // Moved, not copied: a copy of the subtree at each array level is quadratic in depth.
    json elems = std::move(v);
    if (!cut_list(elems, budget)) {
      v = std::move(elems);
      return false;
    }
    v = json{{"len", len}, {"elems", std::move(elems)}, {"truncated", true}};
    return true;
  }
  if (!v.is_object()) {
    budget -= static_cast<long>(size_of(v));
    return false;
  }
  bool any = false;
  budget -= 16;  // the object's own marks, roughly
  for (const char* list : {"elems", "entries", "fields"}) {
    auto it = v.find(list);
    if (it == v.end() || !it->is_array()) continue;
    if (std::string(list) == "entries") {
      // Entries are [k, v] pairs: a pair is kept or left out whole.
      size_t keep = 0;
      for (; keep < it->size() && budget > 0; ++keep)
        budget -= static_cast<long>(size_of((*it)[keep]));
      if (keep < it->size()) {
        it->erase(it->begin() + static_cast<std::ptrdiff_t>(keep), it->end());
        any = true;
      }
    } else if (std::string(list) == "fields") {
      // Fields past the budget are left out (the struct is marked), name and all: a struct
      // of many fields would otherwise stay large.
      size_t keep = 0;
      for (; keep < it->size() && budget > 0; ++keep) {
        json& f = (*it)[keep];
        if (!f.is_object() || !f.contains("value") || !f.contains("name")) continue;
        budget -= static_cast<long>(size_of(f["name"])) + 20;
        any |= cut(f["value"], budget);
      }
      if (keep < it->size()) {
        it->erase(it->begin() + static_cast<std::ptrdiff_t>(keep), it->end());
        any = true;
      }
    } else {
      any |= cut_list(*it, budget);
    }
  }
  for (const char* inner : {"elem", "value"}) {
    auto it = v.find(inner);
    if (it == v.end()) continue;
    if (budget <= 0 && std::string(inner) == "elem") {
      v.erase(inner);
      any = true;
    } else {
      any |= cut(*it, budget);
    }
  }
  for (auto& [k, x] : v.items())
    if (k != "elems" && k != "entries" && k != "fields" && k != "elem" && k != "value")
      budget -= static_cast<long>(k.size() + size_of(x));
  if (any) v["truncated"] = true;
  return any;
}

// At least the size of to_event(c)'s JSON, as size_bound counts: the fixed fields (names,
// numbers, marks) in kFixed, the strings and values by their bound.
constexpr size_t kFixed = 512;

size_t str_bound(const std::string& s) {
  return 2 + 6 * s.size();
}

size_t params_bound(const std::vector<Param>& ps) {
  size_t n = 2;
  for (const auto& p : ps) n += 40 + str_bound(p.name) + str_bound(p.type) + size_bound(p.value);
  return n;
}

size_t call_bound(const CallSite& c, const std::vector<Param>& ps,
                  const std::optional<Event>& stack) {
  return kFixed + str_bound(c.func) + params_bound(ps) + (stack ? size_bound(*stack) : 0);
}

class LineCap : public EventSink {
 public:
  LineCap(std::unique_ptr<EventSink> inner, size_t max) : inner_(std::move(inner)), max_(max) {}
  void emit(const Event& ev) override {
    // Most events are within the cap: passed on as they are, not copied.
    if (!max_ || !may_exceed(ev, max_)) return inner_->emit(ev);
    inner_->emit(cap_event_values(ev, max_));
  }
  // A call event surely within the cap stays typed; one that may not be takes the JSON path
  // above, which decides exactly (and cuts).
  void emit_entry(const CallEntry& e) override {
    if (!max_ || call_bound(e, e.args, e.stack) + str_bound(e.inlined_in) <= max_)
      return inner_->emit_entry(e);
    emit(to_event(e));
  }
  void emit_return(const CallReturn& r) override {
    if (!max_ || call_bound(r, r.results, r.stack) <= max_) return inner_->emit_return(r);
    emit(to_event(r));
  }
  // No values: never cut.
  void emit_unfinished(const CallUnfinished& u) override { inner_->emit_unfinished(u); }
  void flush() override { inner_->flush(); }

 private:
  std::unique_ptr<EventSink> inner_;
  size_t max_;
};

}  // namespace

Event cap_event_values(const Event& ev, size_t max_bytes) {
  if (!may_exceed(ev, max_bytes)) return ev;
  Event out = ev;
  std::vector<json*> values;
  for (const char* key : {"args", "results"}) {
    auto it = out.find(key);
    if (it == out.end() || !it->is_array()) continue;
    for (auto& p : *it)
      if (p.is_object() && p.contains("value")) values.push_back(&p["value"]);
  }
  // The budget is shared, not spent first come first served: a large receiver would take it
  // all and leave the request after it a bare address (issue 36). Each value gets an equal
  // share, and what the values smaller than their share leave goes to the larger ones, so
  // every value shows its top level before any one goes deep.
  std::vector<size_t> sizes(values.size());
  std::vector<size_t> order(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    sizes[i] = size_of(*values[i]);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] < sizes[b]; });
  size_t left = max_bytes;
  bool any = false;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const size_t share = left / (order.size() - k);
    if (sizes[i] <= share) {  // fits whole: left as it is
      left -= sizes[i];
      continue;
    }
    long budget = static_cast<long>(share);
    any |= cut(*values[i], budget);
    left -= share;
  }
  if (any) out["truncated"] = true;
  return out;
}

std::unique_ptr<EventSink> make_line_cap(std::unique_ptr<EventSink> inner, size_t max_bytes) {
  return std::make_unique<LineCap>(std::move(inner), max_bytes);
}

}  // namespace gotap
