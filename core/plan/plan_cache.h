// A cache of probe plans on disk: planning a whole binary (every function decoded, its inline
// sites found) costs seconds, and the same binary is traced again and again. The plan only
// depends on the file (its addresses are link-time ones, never a PIE load's), the patterns,
// the options and gotap itself, so all of them form the key.
//
// The cache is never trusted: a file is used only if it is whole (its size and checksum
// agree), of this format version, and of exactly this key; anything else is ignored and the
// plan made again. Its sites are then checked against the binary (core/plan/cached_sites.h):
// the checksum only finds corruption, and the file can be rewritten. Files are 0600 in a 0700
// directory owned by the user, reached through no other user's directory or link
// (core/sys/private_dir.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan/plan.h"

namespace gotap {

// What a cache holds: the planned functions and the warnings planning added.
struct CachedPlan {
  std::vector<FuncPlan> funcs;
  std::vector<std::string> warnings;
  // The file's string table, which the inline sites' views point into.
  std::shared_ptr<const std::string> strings;
};

// The bytes of one cache file for `key`.
std::string encode_plan_cache(std::string_view key, const std::vector<FuncPlan>& funcs,
                              const std::vector<std::string>& warnings);
// The plan in `bytes` when they are a whole, valid cache file for exactly `key`; nullopt for
// anything else (truncated, corrupt, another version or key). Never throws.
std::optional<CachedPlan> decode_plan_cache(std::string_view bytes, std::string_view key);

// `payload` behind a header that is right for it (its size and checksum): lets a fuzzer reach
// the payload's parser, which a checksum would otherwise keep it from.
std::string plan_cache_with_header(std::string_view payload);

// Where plans are cached: $GOTAP_PLAN_CACHE when it is a path, else
// $XDG_CACHE_HOME/gotap/plans or $HOME/.cache/gotap/plans when that directory is the user's
// own (root under `sudo -E` has a user's), else .cache/gotap/plans in the home the password
// database gives the user (root's: /root); "" when GOTAP_PLAN_CACHE is "off" or "0"
// (disabled) or there is no home of the user's own.
std::string plan_cache_dir();

// Reads the cache file of `key` in `dir`; nullopt when there is none or it is not valid.
std::optional<CachedPlan> load_plan_cache(const std::string& dir, std::string_view key);
// Writes it (atomically: a temporary file renamed); failures are silent, the cache is only
// an optimisation. Keeps at most a few dozen files in `dir`, removing the oldest.
void store_plan_cache(const std::string& dir, std::string_view key,
                      const std::vector<FuncPlan>& funcs, const std::vector<std::string>& warnings);

}  // namespace gotap
