// libFuzzer target: the plan cache reader on arbitrary file bytes (it parses what is on
// disk). The first byte chooses how much of the input is the key, and whether the rest is a
// whole file or a payload behind a right header.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/plan/plan_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t key_len = std::min<size_t>(data[0], size - 1);
  std::string_view key(reinterpret_cast<const char*>(data) + 1, key_len);
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1 + key_len, size - 1 - key_len);
  // Odd first bytes: the rest is a payload, given a right header, so that the fuzzer
  // reaches the payload's parser past the checksum.
  std::string wrapped;
  if (data[0] & 1) bytes = wrapped = gotap::plan_cache_with_header(bytes);
  auto plan = gotap::decode_plan_cache(bytes, key);
  // What a valid file gives (its checksum can be right by the fuzzer's search) survives a
  // round trip.
  if (plan) {
    std::string again = gotap::encode_plan_cache(key, plan->funcs, plan->warnings);
    auto back = gotap::decode_plan_cache(again, key);
    if (!back || gotap::encode_plan_cache(key, back->funcs, back->warnings) != again)
      __builtin_trap();
  }
  return 0;
}
