#!/usr/bin/env bash
# The systemd unit as `cmake --install` leaves it (docs/BROKER.md, "As a
# systemd service"):
#  1. installed into a scratch prefix, ExecStart names the broker installed
#     there, which runs (`--version`);
#  2. `systemd-analyze verify` accepts the installed unit without a word (it
#     exits 0 on unknown keys and bad values, printing them: any output fails);
#  3. the sysusers.d snippet makes the `alkaid` user and group
#     (`systemd-sysusers --root` into a scratch root, not this machine);
#  4. as root: the installed broker started as the unit starts it (its
#     ExecStart options, as a user that is not root, with the unit's
#     AmbientCapabilities and nothing else) removes a leftover segment another
#     user made in /dev/shm, which the same broker without them cannot
#     (/dev/shm is sticky). Skipped, saying so, when not root.
#   systemd_unit_test.sh <build-dir>
# Exit 77 (ctest: SKIP) without systemd-analyze, 1 then if CI=true.
set -euo pipefail
build_dir=$1

skip() {
  echo "SKIP: $*" >&2
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

command -v systemd-analyze >/dev/null || skip "no systemd-analyze (Debian package systemd; scripts/install-deps.sh)"
command -v systemd-sysusers >/dev/null || skip "no systemd-sysusers (Debian package systemd)"

work=$(mktemp -d)
broker_pid=""
leftover=""
cleanup() {
  if [ -n "$broker_pid" ]; then kill "$broker_pid" 2>/dev/null || true; fi
  if [ -n "$leftover" ]; then rm -f "/dev/shm/$leftover"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- 1. Installed, ExecStart the installed broker ---------------------------
prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" --component Unspecified >/dev/null
cmake --install "$build_dir" --prefix "$prefix" --component systemd >/dev/null
unit=$prefix/lib/systemd/system/alkaid-broker.service
sysusers=$prefix/lib/sysusers.d/alkaid.conf
[ -f "$unit" ] || fail "the unit was not installed at $unit"
[ -f "$sysusers" ] || fail "the sysusers.d snippet was not installed at $sysusers"

exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ "$(grep -c '^ExecStart=' "$unit")" -eq 1 ] || fail "expected one ExecStart= in $unit"
read -r -a exec_argv <<<"$exec_start"
[ "${exec_argv[0]}" = "$prefix/bin/alkaid-broker" ] ||
  fail "ExecStart runs '${exec_argv[0]}', not the installed broker $prefix/bin/alkaid-broker"
[ -x "${exec_argv[0]}" ] || fail "${exec_argv[0]} is not an executable"
lib_path=$prefix/lib:$prefix/lib/x86_64-linux-gnu
version=$(LD_LIBRARY_PATH=$lib_path "${exec_argv[0]}" --version)
[[ $version == alkaid-broker* ]] || fail "the installed broker's --version says '$version'"
echo "ExecStart: $exec_start"

# --- 2. systemd-analyze verify ----------------------------------------------
verify_out=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify: $verify_out"
[ -z "$verify_out" ] || fail "systemd-analyze verify complained: $verify_out"
echo "systemd-analyze verify: clean"

# --- 3. The service user, made by the sysusers.d snippet ---------------------
root=$work/root
mkdir -p "$root/etc"
sysusers_out=$(systemd-sysusers --root="$root" "$sysusers" 2>&1) || fail "systemd-sysusers: $sysusers_out"
user=$(sed -n 's/^User=//p' "$unit")
group=$(sed -n 's/^Group=//p' "$unit")
grep -q "^$user:" "$root/etc/passwd" || fail "the snippet made no user '$user' (the unit's User=)"
grep -q "^$group:" "$root/etc/group" || fail "the snippet made no group '$group' (the unit's Group=)"
[[ " ${exec_argv[*]} " == *" --group $group "* ]] || fail "ExecStart does not pass --group $group"
echo "sysusers.d: user '$user' and group '$group' made"

# --- 4. The capabilities the unit grants are the ones the broker needs --------
if [ "$(id -u)" -ne 0 ]; then
  echo "not root: the run as a service user is skipped (it needs setpriv to another uid)"
  exit 0
fi
command -v setpriv >/dev/null || fail "no setpriv (Debian package util-linux)"
ambient=$(sed -n 's/^AmbientCapabilities=//p' "$unit" | tr 'A-Z' 'a-z' | sed 's/cap_//g')
bounding=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr 'A-Z' 'a-z' | sed 's/cap_//g')
# The broker runs as uid/gid 1 (daemon), standing in for `alkaid`: the
# service user is not made on this machine.
service_uid=1
service_gid=1
chmod 0755 "$work"  # the installed broker, for the service uid to run
run_broker() {  # run_broker NAME CAPS(comma-separated, or empty) LOG
  local name=$1 caps=$2 log=$3 sock_dir=$work/run-$1
  mkdir -p "$sock_dir"
  chown "$service_uid:$service_gid" "$sock_dir"
  chmod 0750 "$sock_dir"
  local cap_args=(--inh-caps=-all --bounding-set=-all)
  if [ -n "$caps" ]; then
    local plus
    plus=$(echo "$caps" | tr ' ' '\n' | sed 's/^/+/' | paste -sd, -)
    cap_args=(--inh-caps="$plus" --ambient-caps="$plus" --bounding-set=-all,"$plus")
  fi
  # ExecStart's options, with the socket in a scratch directory instead of
  # /run/alkaid and the group given as the stand-in's gid.
  local args=()
  local i=1
  while [ $i -lt ${#exec_argv[@]} ]; do
    case ${exec_argv[$i]} in
      --socket) args+=(--socket "$sock_dir/broker.sock"); i=$((i + 1)) ;;
      --group) args+=(--group "$service_gid"); i=$((i + 1)) ;;
      *) args+=("${exec_argv[$i]}") ;;
    esac
    i=$((i + 1))
  done
  # A leftover of a producer that ran as another user (nobody), named as a
  # broker of this name would name it.
  leftover=$name.leftover
  setpriv --reuid=65534 --regid=65534 --clear-groups touch "/dev/shm/$leftover"
  LD_LIBRARY_PATH=$lib_path setpriv --reuid=$service_uid --regid=$service_gid --clear-groups \
    --no-new-privs "${cap_args[@]}" \
    "${exec_argv[0]}" "${args[@]}" --name "$name" >"$log" 2>&1 &
  broker_pid=$!
  local tries=0
  until grep -q "listening on" "$log"; do
    kill -0 "$broker_pid" 2>/dev/null || fail "the broker ($name) exited: $(cat "$log")"
    tries=$((tries + 1))
    [ $tries -lt 600 ] || fail "the broker ($name) did not start: $(cat "$log")"
    sleep 0.05
  done
  kill -TERM "$broker_pid"
  wait "$broker_pid" || fail "the broker ($name) did not exit 0 on SIGTERM: $(cat "$log")"
  broker_pid=""
}

[ "$ambient" = "$bounding" ] || fail "AmbientCapabilities ($ambient) and CapabilityBoundingSet ($bounding) differ"
name=unit$$a
run_broker "$name" "$ambient" "$work/with.log"
[ ! -e "/dev/shm/$name.leftover" ] ||
  fail "the broker with the unit's capabilities ($ambient) left another user's segment: $(cat "$work/with.log")"
grep -q "removed leftover segment $name.leftover" "$work/with.log" ||
  fail "the broker did not say it removed the leftover: $(cat "$work/with.log")"
echo "as uid $service_uid with '$ambient': another user's leftover segment removed"

# The same without: the segment stays, and the broker says why. This is why
# the unit grants the capability.
name=unit$$b
run_broker "$name" "" "$work/without.log"
[ -e "/dev/shm/$name.leftover" ] || fail "without capabilities the leftover went anyway: the test proves nothing"
grep -q "cannot remove leftover segment $name.leftover: .*ermission\|cannot remove leftover segment $name.leftover: .*not permitted" "$work/without.log" ||
  fail "the broker without the capability did not say why: $(cat "$work/without.log")"
rm -f "/dev/shm/$name.leftover"
leftover=""
echo "as uid $service_uid without capabilities: the leftover stays (\"cannot remove leftover segment\")"
echo "PASS"
