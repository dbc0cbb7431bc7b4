#!/usr/bin/env bash
# Offline checks of the systemd unit (default: systemd/netperfd.service):
#  1. `systemd-analyze verify` on a copy whose ExecStart is /bin/true (the real binary
#     is not installed here); verify exits 0 on unknown keys, so any stderr output fails.
#  2. `systemd-analyze security --offline=yes`: the exposure must be <= 2.5 (0-10 scale).
# Needs systemd-analyze (Debian: apt-get install systemd); installs nothing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
unit=${1:-$here/../systemd/netperfd.service}
max_exposure=2.5

command -v systemd-analyze >/dev/null || { echo "check-unit: systemd-analyze not found (apt-get install systemd)" >&2; exit 2; }
[[ -f $unit ]] || { echo "check-unit: no such unit: $unit" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
copy=$tmp/netperfd.service
# ExecStart -> /bin/true: verify checks that the executable exists.
sed -e 's|^ExecStart=.*|ExecStart=/bin/true|' -- "$unit" >"$copy"
grep -qx 'ExecStart=/bin/true' "$copy" || { echo "check-unit: no ExecStart= line in $unit" >&2; exit 1; }

status=0
echo "== systemd-analyze verify"
# User=netperfd need not exist on this machine: verify does not resolve users.
if ! SYSTEMD_LOG_COLOR=0 systemd-analyze verify --man=no "$copy" >"$tmp/verify.out" 2>"$tmp/verify.err"; then
    echo "check-unit: systemd-analyze verify failed" >&2
    status=1
fi
cat "$tmp/verify.out"
if [[ -s $tmp/verify.err ]]; then
    echo "check-unit: systemd-analyze verify wrote to stderr:" >&2
    cat "$tmp/verify.err" >&2
    status=1
else
    echo "verify: clean"
fi

echo "== systemd-analyze security --offline=yes --threshold=25"
# --threshold is on the 0-100 scale (25 = 2.5); the command fails above it.
if ! systemd-analyze security --offline=yes --threshold=25 --no-pager "$copy" >"$tmp/sec.out" 2>&1; then
    cat "$tmp/sec.out"
    echo "check-unit: systemd-analyze security failed (exposure above 2.5?)" >&2
    exit 1
fi
line=$(grep -E 'Overall exposure level' "$tmp/sec.out" || true)
score=$(sed -nE 's/.*Overall exposure level for [^:]*: ([0-9]+\.[0-9]+).*/\1/p' <<<"$line")
if [[ -z $score ]]; then
    cat "$tmp/sec.out"
    echo "check-unit: could not read the exposure level" >&2
    exit 1
fi
echo "$line"
if ! awk -v s="$score" -v m="$max_exposure" 'BEGIN { exit !(s <= m) }'; then
    echo "check-unit: exposure $score > $max_exposure" >&2
    status=1
fi

if ((status == 0)); then echo "check-unit: OK (exposure $score)"; fi
exit "$status"
