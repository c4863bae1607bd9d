#include "core/backend.h"

#include <fmt/format.h>

namespace gotap {

std::string tracing_banner(size_t nfuncs, size_t nprobes, std::string_view backend,
                           std::string_view where, bool goroutines) {
  std::string what = fmt::format("{} function{}", nfuncs, nfuncs == 1 ? "" : "s");
  if (goroutines) what = nfuncs ? "goroutines and " + what : "goroutines";
  return fmt::format("Tracing {} ({} probe{}) with {} in {}. Ctrl-C to end.", what, nprobes,
                     nprobes == 1 ? "" : "s", backend, where);
}

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

namespace {
std::vector<BackendInfo>& registry() {
  static std::vector<BackendInfo> r;
  return r;
}
}  // namespace

void register_backend(BackendInfo info) {
  registry().push_back(std::move(info));
}
const std::vector<BackendInfo>& registered_backends() {
  return registry();
}

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, std::string* why) {
  auto find = [](const std::string& n) -> const BackendInfo* {
    for (const auto& b : registry())
      if (b.name == n) return &b;
    return nullptr;
  };
  if (name == "auto") {
    std::string reasons;
    for (const char* pref : {"ebpf", "ptrace"}) {
      const BackendInfo* b = find(pref);
      if (!b) continue;
      std::string r = b->unavailable_reason();
      if (r.empty()) {
        if (why)
          *why = reasons.empty() ? std::string(pref) + " is usable"
                                 : std::string("using ") + pref + " because " + reasons;
        return b->make();
      }
      if (!reasons.empty()) reasons += "; ";
      reasons += std::string(pref) + " is unavailable: " + r;
    }
    return runtime_error("no usable backend: {}", reasons.empty() ? "none built" : reasons);
  }
  const BackendInfo* b = find(name);
  if (!b) return make_error("unknown backend '{}' (use ptrace, ebpf, trampoline or auto)", name);
  std::string r = b->unavailable_reason();
  if (!r.empty()) return runtime_error("backend {} is unavailable: {}", name, r);
  return b->make();
}

}  // namespace gotap
