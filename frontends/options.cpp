#include "frontends/options.h"

#include <cstdlib>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sys/output_file.h"

namespace gotap::cli {

Result<po::variables_map> parse_options(const std::vector<std::string>& args,
                                        const po::options_description& desc,
                                        const char* positional_name) {
  po::options_description all;
  all.add(desc);
  all.add_options()(positional_name, po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add(positional_name, -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return make_error("{}", e.what());
  }
  return vm;
}

std::vector<std::string> positionals(const po::variables_map& vm, const char* name) {
  if (!vm.count(name)) return {};
  return vm[name].as<std::vector<std::string>>();
}

Result<OutputFile> open_output(const po::variables_map& vm, const char* option, std::FILE* fallback,
                               bool live) {
  std::optional<std::string> path;
  if (vm.count(option)) path = vm[option].as<std::string>();
  return open_output_path(path, fallback, live);
}

Result<OutputFile> open_output_path(const std::optional<std::string>& given, std::FILE* fallback,
                                    bool live) {
  OutputFile f;
  f.fp = fallback;
  if (!given) {
    // Standard output on a pipe (`gotap trace ... | grep`) is line-buffered as on a terminal:
    // each event reaches the reader when it happens, not 4 KB later, and a traced program
    // writing to the same pipe cannot split one of gotap's lines (up to PIPE_BUF, 4 KB) in
    // two. A file keeps full buffering: -o is the way for high event rates.
    struct stat st {};
    if (live && fallback == stdout && fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode))
      setvbuf(stdout, nullptr, _IOLBF, 1 << 16);
    return f;
  }
  const std::string& path = *given;
  // Events hold the traced program's memory, secrets included: readable by the owner only,
  // as perf.data is, and never written through another user's link or into their file.
  auto opened = sys::open_output_file(path);
  if (!opened) return opened.error();
  int fd = opened->release();
  f.owned.reset(fdopen(fd, "w"));
  if (!f.owned) {
    close(fd);
    return errno_error(ErrorKind::BadInput, "cannot write {}", path);
  }
  f.fp = f.owned.get();
  return f;
}

void add_debuginfo_options(po::options_description& desc) {
  desc.add_options()("debug-dir", po::value<std::vector<std::string>>()->composing(),
                     "also look for separate debug files in DIR (as in /usr/lib/debug)")(
      "no-debuginfo", "do not look for separate debug files (debuglink, build ID, debuginfod)");
}

OpenOptions open_options(const po::variables_map& vm) {
  OpenOptions o;
  o.find_debuginfo = !vm.count("no-debuginfo");
  if (vm.count("debug-dir")) o.debug_dirs = vm["debug-dir"].as<std::vector<std::string>>();
  // A debuginfod server that does not answer must not hold gotap for libdebuginfod's
  // default 90 s.
  setenv("DEBUGINFOD_TIMEOUT", "10", /*overwrite=*/0);
  return o;
}

}  // namespace gotap::cli
