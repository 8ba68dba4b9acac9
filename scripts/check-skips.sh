#!/usr/bin/env bash
# Fails when a test that docs/RELIABILITY.md cites was skipped.
#   scripts/check-skips.sh <ctest output> [doc]     (doc: docs/RELIABILITY.md)
# Reads the "(Skipped)" lines of ctest's summary ("The following tests did
# not run"). A cited test is a `backticked` word of the doc that names it:
# the whole ctest name (`fault_small_shm`, `Prefix/Suite.Test/*`,
# `Suite.*`: a `*` matches anything) or the part after its suite
# (`ChannelReclaimsExactlyWhatAKilledConsumerHeld` cites
# `ShmTest.ChannelReclaimsExactlyWhatAKilledConsumerHeld`). A skipped test
# the doc does not cite is listed and allowed.
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:?usage: scripts/check-skips.sh <ctest output> [doc]}"
doc="${2:-docs/RELIABILITY.md}"

mapfile -t skipped < <(sed -n 's/^[[:space:]]*[0-9][0-9]* - \(.*\) (Skipped)[[:space:]]*$/\1/p' "$log")
# Words in backticks that could name a test: letters, digits, _ . / * -
mapfile -t cited < <(grep -o '`[A-Za-z0-9_./*-]*`' "$doc" | tr -d '`' | sort -u)

bad=0
for t in "${skipped[@]}"; do
  hit=""
  for c in "${cited[@]}"; do
    [[ "$c" == *[A-Za-z]* ]] || continue
    # shellcheck disable=SC2053  # $c is a glob on purpose
    if [[ "$t" == $c || "$t" == *.$c ]]; then hit="$c"; break; fi
  done
  if [ -n "$hit" ]; then
    echo "check-skips: $t was skipped, and $doc cites it (\`$hit\`): a failure" >&2
    bad=1
  else
    echo "check-skips: $t was skipped (not cited by $doc)"
  fi
done
if [ $bad -ne 0 ]; then exit 1; fi
echo "check-skips: ${#skipped[@]} skipped, none cited by $doc"
