#!/usr/bin/env bash
# Runs a test program with a small /dev/shm: a private mount namespace in
# which a tmpfs of SIZE (default 4m) is mounted over /dev/shm, so the host's
# /dev/shm is untouched and nothing leaks out of it.
#   run_in_small_shm.sh [--size 4m] PROGRAM [ARGS...]
# Exits 77 (ctest SKIP_RETURN_CODE) with the reason when the namespace or the
# mount is impossible (not root, no CAP_SYS_ADMIN, no unshare); otherwise the
# program's own exit code. With CI=true (CI runs as root, where a skip means
# the gate did not run) it exits 1 instead of skipping.
set -uo pipefail
size=4m
if [ "${1:-}" = "--size" ]; then size=$2; shift 2; fi
if [ $# -eq 0 ]; then echo "usage: $0 [--size S] PROGRAM [ARGS...]" >&2; exit 2; fi

skip_code=77
if [ "${CI:-}" = "true" ]; then skip_code=1; fi
skip() {
  if [ "$skip_code" -eq 77 ]; then echo "SKIPPED: $*" >&2; else echo "FAILED (CI=true, no skip): $*" >&2; fi
  exit "$skip_code"
}
command -v unshare >/dev/null 2>&1 || skip "unshare (util-linux) is not installed"
[ "$(id -u)" -eq 0 ] || skip "not root: mounting a small /dev/shm needs CAP_SYS_ADMIN"
unshare -m --propagation private true 2>/dev/null \
  || skip "cannot create a private mount namespace (unshare -m failed: no CAP_SYS_ADMIN?)"

# Exit 77 from inside means the mount failed; the program is exec'd only
# after a successful mount, so its own code 77 is not expected.
exec unshare -m --propagation private -- bash -c '
  size=$1; skip_code=$2; shift 2
  if ! mount -t tmpfs -o "size=$size,mode=1777" tmpfs /dev/shm 2>/tmp/alkaid-small-shm-$$.err; then
    echo "SKIPPED (exit $skip_code): cannot mount a tmpfs on /dev/shm: $(cat /tmp/alkaid-small-shm-$$.err)" >&2
    rm -f /tmp/alkaid-small-shm-$$.err
    exit "$skip_code"
  fi
  rm -f /tmp/alkaid-small-shm-$$.err
  echo "run_in_small_shm: /dev/shm is a private tmpfs of $size" >&2
  exec "$@"' bash "$size" "$skip_code" "$@"
