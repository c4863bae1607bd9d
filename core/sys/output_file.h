// The files gotap writes because the user named them (-o, --record, report -o). gotap runs as
// root and they hold the traced program's memory, so they are opened as the kernel's
// fs.protected_symlinks and fs.protected_regular would allow, whatever those sysctls say
// (docs/design.md, "Files gotap writes"):
//   - a symlink on the way that sits in a sticky, world-writable directory (/tmp) is followed
//     only when its owner is that directory's owner or gotap's user;
//   - the file named is never reached through a link another user owns: a link there is
//     followed only when it is gotap's user's or root's (/dev/stdout), and never to create;
//   - a missing file is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW), mode 0600;
//   - an existing regular file is written only when it is gotap's user's and has no other
//     hard link: emptied and set to 0600, so that no one kept a way to read it;
//   - a FIFO or a character device (/dev/null, a terminal) is written as it is, except a FIFO
//     of another user in a sticky, world-writable directory; anything else is refused.
#pragma once

#include <string>

#include "core/model/result.h"
#include "core/sys/fd.h"

namespace gotap::sys {

// The file, open for writing (close-on-exec); bad input naming `path` and why, otherwise.
Result<Fd> open_output_file(const std::string& path);

}  // namespace gotap::sys
