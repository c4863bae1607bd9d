#include "core/sys/private_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace gotap::sys {

namespace {

bool trusted_owner(uid_t uid) {
  return uid == ::geteuid() || uid == 0;
}

// The component `name` of the open directory `dir`: a directory of a trusted owner, reached
// through no link but a trusted owner's. Made 0700 first when missing and `create`.
Fd open_component(int dir, const std::string& name, bool create) {
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT || !create) return Fd();
    if (::mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST) return Fd();
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Fd();
  }
  int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  if (!S_ISLNK(st.st_mode))
    flags |= O_NOFOLLOW;
  else if (!trusted_owner(st.st_uid))
    return Fd();
  Fd fd(::openat(dir, name.c_str(), flags));
  if (!fd || ::fstat(fd.get(), &st) != 0 || !trusted_owner(st.st_uid)) return Fd();
  return fd;
}

}  // namespace

Fd open_private_dir(const std::string& path, bool create) {
  if (!std::string_view(path).starts_with('/')) return Fd();
  Fd cur(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  size_t at = 1;
  while (cur && at < path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    const std::string name = path.substr(at, slash - at);
    at = slash + 1;
    if (name.empty() || name == ".") continue;
    if (name == "..") return Fd();  // a path that climbs is not one gotap builds
    cur = open_component(cur.get(), name, create);
  }
  struct stat st;
  if (!cur || ::fstat(cur.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077))
    return Fd();
  return cur;
}

bool nearest_dir_is_own(const std::string& path) {
  if (!std::string_view(path).starts_with('/')) return false;
  std::string p = path;
  for (;;) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) return S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
    if (errno != ENOENT || p == "/") return false;
    const size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
}

}  // namespace gotap::sys
