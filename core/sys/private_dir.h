// A directory of gotap's own (the plan cache): gotap runs as root, often with a user's
// environment (`sudo -E`), so a path from HOME or XDG_CACHE_HOME may lead through what another
// user controls. Every component is opened without following links (O_NOFOLLOW|O_DIRECTORY)
// and checked with fstat: a directory on the way belongs to gotap's user or to root, a link is
// followed only when it is theirs too, and the directory itself is gotap's user's alone (no
// access for group or others). Missing components are made 0700.
#pragma once

#include <string>

#include "core/sys/fd.h"

namespace gotap::sys {

// The directory at the absolute `path`, open (O_RDONLY|O_DIRECTORY, close-on-exec); invalid
// when it is not one as above, or is missing and `create` is false or making it failed.
Fd open_private_dir(const std::string& path, bool create);

// Whether the directory at `path`, or the nearest of its ancestors that exists, belongs to
// gotap's user: whether a cache under it would be theirs.
bool nearest_dir_is_own(const std::string& path);

}  // namespace gotap::sys
