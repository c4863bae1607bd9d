# Install layout and the Debian package.
#
#   cmake --install build            # /usr/local/{bin,share/man/man1,share/bash-completion}
#   (cd build && cpack -G DEB)       # gotap_<version>_<arch>.deb, prefix /usr
#
# The gotap executable's own install rule lives next to its target in frontends/.
include(GNUInstallDirs)

# Debian policy wants man pages gzip-compressed; -n keeps the archive byte-identical
# between builds (no name or timestamp in the gzip header).
find_program(GOTAP_GZIP gzip REQUIRED)
set(GOTAP_MANPAGE ${PROJECT_SOURCE_DIR}/docs/gotap.1)
set(GOTAP_MANPAGE_GZ ${PROJECT_BINARY_DIR}/gotap.1.gz)
add_custom_command(
  OUTPUT ${GOTAP_MANPAGE_GZ}
  COMMAND sh -c "'${GOTAP_GZIP}' -9n -c '${GOTAP_MANPAGE}' > '${GOTAP_MANPAGE_GZ}.tmp'"
  COMMAND ${CMAKE_COMMAND} -E rename ${GOTAP_MANPAGE_GZ}.tmp ${GOTAP_MANPAGE_GZ}
  DEPENDS ${GOTAP_MANPAGE}
  COMMENT "Compressing the gotap(1) man page"
  VERBATIM)
add_custom_target(gotap_manpage ALL DEPENDS ${GOTAP_MANPAGE_GZ})

install(FILES ${GOTAP_MANPAGE_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# bash-completion loads completions/<command> on first use, so the file is named after it.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/gotap.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME gotap)
# gotap(1) points here for the full CLI and JSON contract.
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/cli.md
              ${PROJECT_SOURCE_DIR}/docs/json.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gotap)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "gotap maintainers")
set(GOTAP_PACKAGE_CONTACT "gotap maintainers <maintainers@users.noreply.a-seed-6170d283.example>"
    CACHE STRING "Maintainer field of the .deb")
set(CPACK_PACKAGE_CONTACT ${GOTAP_PACKAGE_CONTACT})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tracer for Go programs: arguments, results and latency")
# CPack turns each line into a Debian description continuation line; it does not rewrap.
set(CPACK_PACKAGE_DESCRIPTION [[
gotap traces Go programs on Linux x86-64: what a function was called with
and what it returned, how long each call took per goroutine, and where every
probe goes. It reads Go binaries from Go 1.17 to 1.27, stripped or not, PIE
or not, with or without cgo, and never uses uretprobes, so it does not crash
Go programs. It traces with eBPF uprobes when the kernel allows it, and with
ptrace otherwise.]])
# A RelWithDebInfo gotap is ~30 MB of DWARF; the package ships the stripped binary.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# dpkg-shlibdeps derives Depends from the libraries the binary links (libelf1, libdw1,
# libzydis4.0, libbpf1, libfmt9, libboost-program-options...), so the list cannot go stale.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "bash-completion")

# Keep build trees and VCS data out of `cpack --config CPackSourceConfig.cmake`.
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build[^/]*/" "/\\\\.cache/")

include(CPack)
