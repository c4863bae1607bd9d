# Shared by the bench scripts (sourced): figures collected per name over interleaved runs,
# their medians, and min / median / max.

# res[NAME]: the figures of NAME's runs, space-separated ("nan" for a run that gave none).
declare -A res

# run NAME COMMAND...: runs COMMAND and appends the number that the shell function named by
# $metric finds in its output to res[NAME].
run() {
  local name=$1
  shift
  local v
  v=$("$@" 2>/dev/null | "$metric" || true)
  res[$name]="${res[$name]:-} ${v:-nan}"
}

# The median of the numbers on standard input ("nan" when there are none).
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "nan")}'; }

# stats NUMBERS...: "min / median / max", each rounded.
stats() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%.0f / %.0f / %.0f", v[1], v[int((NR+1)/2)], v[NR]}'
}

# need CMD:PACKAGE...: exits 2 with one line naming every CMD that is not installed and the
# Debian packages that have them, before a run measures anything: a missing /usr/bin/time
# otherwise shows only later, as a figure file that was never written.
need() {
  local c cmds="" pkgs=""
  for c in "$@"; do
    command -v "${c%%:*}" >/dev/null || { cmds+=" ${c%%:*}"; pkgs+=" ${c##*:}"; }
  done
  [ -z "$cmds" ] && return
  echo "$(basename "$0"): not installed:$cmds (apt-get install$pkgs, or ./dev.sh test-deps)" >&2
  exit 2
}
