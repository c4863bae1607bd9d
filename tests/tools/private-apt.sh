# Sourced by fetch-go.sh and check-newest-go.sh: a throw-away apt configuration derived from
# the system's own Debian source entry, so that the system's apt setup stays untouched and
# nothing naming the mirror is left behind (the caller removes ROOT).

# The mirror URI of the system's main Debian entry (deb822 or one-line format); fails when
# there is none.
system_uri() {
  local f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) if ($i !~ /security/) {print $i; exit}}' "$f")
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list)
  fi
  [ -n "$uri" ] || return 1
  echo "$uri"
}

# private_apt ROOT URI SUITE...: an apt state in ROOT whose sources are URI's SUITEs (main),
# and apt_opts, the options that point apt-get and apt-cache at it. The archives of older
# suites may carry an expired Valid-Until (a stored copy of the registry): the signatures are
# still checked.
private_apt() {
  local root=$1 uri=$2 suite
  shift 2
  mkdir -p "$root/lists/partial" "$root/archives/partial" "$root/etc/preferences.d" \
    "$root/etc/apt.conf.d"
  for suite in "$@"; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main"
  done >"$root/etc/sources.list"
  apt_opts=(-o "Dir::Etc::sourcelist=$root/etc/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::Etc::preferencesparts=$root/etc/preferences.d"
    -o "Dir::Etc::parts=$root/etc/apt.conf.d" -o "Dir::State::Lists=$root/lists"
    -o "Dir::Cache=$root" -o "Dir::State::status=/dev/null" -o "APT::Sandbox::User=root"
    -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1" -o "Acquire::Retries=3"
    -o "Acquire::Check-Valid-Until=false")
}
