// Filling an array map with 100,000s of entries (a whole binary's sites) a chunk at a time:
// one system call per entry is 100,000s of them, and the whole table at once would be tens of
// MB more at the peak of arming.
#pragma once

#include <bpf/bpf.h>

#include <cstdint>
#include <vector>

#include "core/model/result.h"

namespace gotap::ebpf {

template <class Value>
class MapWriter {
 public:
  static constexpr size_t kChunk = 1024;
  explicit MapWriter(int fd) : fd_(fd) {
    keys_.reserve(kChunk);
    values_.reserve(kChunk);
  }
  // map[key] = v, written with the chunk it fills.
  Result<void> put(uint32_t key, const Value& v) {
    keys_.push_back(key);
    values_.push_back(v);
    return keys_.size() == kChunk ? flush() : Result<void>{};
  }
  // What is held, written now. The last call after the last put.
  Result<void> flush() {
    uint32_t count = static_cast<uint32_t>(keys_.size());
    // Kernels before 5.6 have no batch operations: one element at a time there.
    if (count && !(batch_ &&
                   bpf_map_update_batch(fd_, keys_.data(), values_.data(), &count, nullptr) == 0)) {
      batch_ = false;
      for (size_t k = 0; k < keys_.size(); ++k)
        if (bpf_map_update_elem(fd_, &keys_[k], &values_[k], BPF_ANY) != 0)
          return errno_error(ErrorKind::Runtime, "cannot configure probe {}", keys_[k]);
    }
    keys_.clear();
    values_.clear();
    return {};
  }

 private:
  int fd_;
  bool batch_ = true;
  std::vector<uint32_t> keys_;
  std::vector<Value> values_;
};

}  // namespace gotap::ebpf
