#!/usr/bin/env bash
# benches/ui-latency.sh — does the web UI stay responsive while a run writes its history?
#
# What it measures
#   A board namespace with four ports (eth0..eth3, each a veth to its own peer namespace,
#   documentation addresses, no route anywhere else) runs `netperfd daemon`; stock
#   `iperf3 -s` listens in each peer. A 4-leg multi-port run (one leg per port, TCP, -P 4 at
#   25 Mbit/s per stream: the run writes 16 streams of intervals without saturating the CPU)
#   writes intervals and monitor samples to SQLite while a client in the board namespace asks,
#   one request after another, for `GET /api/health` and the run's page `GET /runs/ID`.
#   Printed: count, p50, p99 and max latency (ms) of each, during the run.
#   Budget (issue 17): p99 < 100 ms for both. Exits 0 either way (1 only when it cannot run).
#
# Usage: sudo benches/ui-latency.sh   (root: namespaces)
#   DURATION=15   seconds of the multi-port run
#   NETPERFD=/path/to/netperfd   (default: cargo build --release, target/release/netperfd)
set -euo pipefail
DURATION=${DURATION:-15}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "ui-latency.sh: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run as root (network namespaces)"
command -v iperf3 >/dev/null || die "iperf3 not found"
if [[ -z ${NETPERFD:-} ]]; then
    (cd "$repo" && cargo build --release --locked -q) || die "build failed"
    NETPERFD="${CARGO_TARGET_DIR:-$repo/target}/release/netperfd"
fi

sfx=$$
B=npu-board-$sfx
PEERS=(npu-pc1-$sfx npu-pc2-$sfx npu-pc3-$sfx npu-pc4-$sfx)
# Four ports, one peer each (documentation ranges split in halves): eth$i = board .1/.129, peer .2/.130.
NETS=(192.0.2.0 192.0.2.128 198.51.100.0 198.51.100.128)
tmp=$(mktemp -d)
cleanup() {
    for ns in $B "${PEERS[@]}"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    sleep 0.3
    for ns in $B "${PEERS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$B"; ip -n "$B" link set lo up
for i in 0 1 2 3; do
    ns=${PEERS[$i]} net=${NETS[$i]}
    base=${net%.*}; last=${net##*.}
    ip netns add "$ns"; ip -n "$ns" link set lo up
    ip link add "eth$i" netns "$B" type veth peer name eth0 netns "$ns"
    ip -n "$B" addr add "$base.$((last + 1))/25" dev "eth$i"
    ip -n "$ns" addr add "$base.$((last + 2))/25" dev eth0
    ip -n "$B" link set "eth$i" up
    ip -n "$ns" link set eth0 up
    ip netns exec "$ns" iperf3 -s -D >/dev/null 2>&1
done
ip netns exec "$B" "$NETPERFD" daemon --listen 127.0.0.1:18080 --data "$tmp/data" \
    >"$tmp/daemon.log" 2>&1 &
sleep 2

ip netns exec "$B" python3 - "$tmp/daemon.log" "$DURATION" <<'PY'
import http.cookiejar, json, re, sys, time, urllib.error, urllib.parse, urllib.request
log, duration = open(sys.argv[1]).read(), int(sys.argv[2])
base = "http://127.0.0.1:18080"
code = re.search(r"setup code ([0-9A-Za-z-]+)", log).group(1)
jar = http.cookiejar.CookieJar()
op = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
form = urllib.parse.urlencode({"code": code, "password": "correct horse", "confirm": "correct horse"}).encode()
op.open(base + "/setup", form)
csrf = re.search(r'name="csrf" value="([^"]+)"', op.open(base + "/").read().decode()).group(1)
peers = ("192.0.2.2", "192.0.2.130", "198.51.100.2", "198.51.100.130")
legs = [{"host": h, "bind": f"eth{i}", "duration": str(duration), "parallel": "4", "bitrate": "25M"}
        for i, h in enumerate(peers)]
req = urllib.request.Request(base + "/api/runs/multi", json.dumps({"legs": legs}).encode(),
                             {"Content-Type": "application/json", "X-CSRF-Token": csrf})
try:
    run = json.loads(op.open(req).read())
except urllib.error.HTTPError as e:
    sys.exit(f"ui-latency.sh: the multi-port run did not start: {e.code} {e.read().decode()}")
rid = run.get("id") or run.get("run_id")
lat = {"/api/health": [], f"/runs/{rid}": []}
end = time.time() + duration - 1
while time.time() < end:
    for path in lat:
        t = time.perf_counter()
        op.open(base + path).read()
        lat[path].append((time.perf_counter() - t) * 1000)
print(f"4-leg multi-port run {rid}, {duration} s, requests one after another:")
worst = 0.0
for path, v in lat.items():
    v.sort()
    p = lambda q: v[min(len(v) - 1, int(q * len(v)))]
    worst = max(worst, p(0.99))
    print(f"  GET {path:<14} n={len(v):5d}  p50 {p(0.5):7.2f} ms  p99 {p(0.99):7.2f} ms  max {v[-1]:7.2f} ms")
print("BUDGET MET (p99 < 100 ms)" if worst < 100 else "BUDGET MISSED (p99 >= 100 ms)")
PY
