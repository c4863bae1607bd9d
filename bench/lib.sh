# Shared by the bench scripts (sourced): figures collected per name over interleaved runs,
# and their medians.

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
