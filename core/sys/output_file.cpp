#include "core/sys/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace gotap::sys {

namespace {

// /tmp and its like: anyone may add an entry, only its owner may remove it.
bool sticky_world_writable(const struct stat& dir) {
  return (dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH);
}

// fs.protected_symlinks: a link in such a directory is followed only when it is the
// directory owner's or the follower's.
bool may_follow(const struct stat& dir, const struct stat& link) {
  return !sticky_world_writable(dir) || link.st_uid == dir.st_uid || link.st_uid == ::geteuid();
}

Error refused(const std::string& path, std::string_view why) {
  return make_error("cannot write {}: {}", path, why);
}

// The directory that holds `path`'s last component, each link on the way checked as the
// kernel's protected_symlinks would. A link's own target is then resolved by the kernel:
// one that the rule lets through was made by the directory's owner or by gotap's user.
Result<Fd> open_parent(const std::string& path, std::string_view dir_part) {
  Fd cur(::open(dir_part.starts_with('/') ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!cur) return errno_error(ErrorKind::BadInput, "cannot write {}", path);
  size_t at = 0;
  while (at < dir_part.size()) {
    size_t slash = dir_part.find('/', at);
    if (slash == std::string_view::npos) slash = dir_part.size();
    const std::string name(dir_part.substr(at, slash - at));
    at = slash + 1;
    if (name.empty() || name == ".") continue;
    struct stat dir, st;
    if (::fstat(cur.get(), &dir) != 0 ||
        ::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return errno_error(ErrorKind::BadInput, "cannot write {}", path);
    if (S_ISLNK(st.st_mode) && !may_follow(dir, st))
      return refused(path,
                     "a directory on its way is a link that another user planted in a "
                     "sticky, world-writable directory");
    // A directory that became a link since it was looked at is not followed (O_PATH with
    // O_NOFOLLOW opens the link itself, which O_DIRECTORY refuses).
    const int follow = S_ISLNK(st.st_mode) ? 0 : O_NOFOLLOW;
    Fd next(::openat(cur.get(), name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | follow));
    if (!next) return errno_error(ErrorKind::BadInput, "cannot write {}", path);
    cur = std::move(next);
  }
  return cur;
}

// What may be written of an existing file (st), held in the directory `dir` (null when it
// was reached through a link, whose target's directory is not known).
const char* why_not(const struct stat& st, const struct stat* dir) {
  if (S_ISREG(st.st_mode)) {
    if (st.st_uid != ::geteuid())
      return "the file exists and belongs to another user (remove it or name a new file)";
    // Another name of it, made by someone who could not write it (a hard link in /tmp to
    // one of root's files), would have root empty that file.
    return st.st_nlink > 1 ? "the file has other hard links" : nullptr;
  }
  if (S_ISFIFO(st.st_mode))
    return dir && sticky_world_writable(*dir) && st.st_uid != ::geteuid() &&
                   st.st_uid != dir->st_uid
               ? "it is a FIFO of another user in a sticky, world-writable directory"
               : nullptr;
  if (S_ISCHR(st.st_mode)) return nullptr;
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  return "it is not a regular file, a FIFO or a character device";
}

}  // namespace

Result<Fd> open_output_file(const std::string& path) {
  if (path.empty()) return make_error("cannot write an empty file name");
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return refused(path, "it is a directory");
  auto parent =
      open_parent(path, slash == std::string::npos ? std::string_view()
                                                   : std::string_view(path).substr(0, slash + 1));
  if (!parent) return parent.error();
  const int dfd = parent->get();
  struct stat dir;
  if (::fstat(dfd, &dir) != 0) return errno_error(ErrorKind::BadInput, "cannot write {}", path);
  constexpr int kWrite = O_WRONLY | O_CLOEXEC | O_NOCTTY;
  // Each step is checked against what the directory holds when it is taken; a file that
  // another process swaps in between is found by its inode and the steps start again.
  for (int attempt = 0; attempt < 8; ++attempt) {
    struct stat lst;
    if (::fstatat(dfd, name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) return errno_error(ErrorKind::BadInput, "cannot write {}", path);
      Fd fd(::openat(dfd, name.c_str(), kWrite | O_CREAT | O_EXCL | O_NOFOLLOW, 0600));
      if (!fd && errno == EEXIST) continue;
      if (!fd) return errno_error(ErrorKind::BadInput, "cannot write {}", path);
      ::fchmod(fd.get(), 0600);  // whatever the umask
      return fd;
    }
    Fd fd;
    const bool link = S_ISLNK(lst.st_mode);
    if (link) {
      // Links made by the user or by root (/dev/stdout) are theirs to point; another user's
      // could point anywhere root can write.
      if ((lst.st_uid != ::geteuid() && lst.st_uid != 0) || !may_follow(dir, lst))
        return refused(path, "it is a link that another user owns");
      fd.reset(::openat(dfd, name.c_str(), kWrite));  // never O_CREAT through a link
      if (!fd && errno == ENOENT) return refused(path, "it is a link to a missing file");
    } else {
      if (const char* why = why_not(lst, &dir)) return refused(path, why);
      fd.reset(::openat(dfd, name.c_str(), kWrite | O_NOFOLLOW));
      if (!fd && (errno == ELOOP || errno == ENOENT)) continue;  // swapped meanwhile
    }
    if (!fd) return errno_error(ErrorKind::BadInput, "cannot write {}", path);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0)
      return errno_error(ErrorKind::BadInput, "cannot write {}", path);
    if (!link && (st.st_dev != lst.st_dev || st.st_ino != lst.st_ino)) continue;
    if (const char* why = why_not(st, link ? nullptr : &dir)) return refused(path, why);
    if (S_ISREG(st.st_mode) && (::ftruncate(fd.get(), 0) != 0 || ::fchmod(fd.get(), 0600) != 0))
      return errno_error(ErrorKind::BadInput, "cannot write {}", path);
    return fd;
  }
  return refused(path, "it keeps changing while being opened");
}

}  // namespace gotap::sys
