#!/usr/bin/env bash
# benches/ui-latency.sh — does the web UI stay responsive while a run writes its history?
#
# What it measures
#   A board namespace with two ports (eth0 → pc1, eth1 → pc2, documentation addresses, veth,
#   no route anywhere else) runs `netperfd daemon`; stock `iperf3 -s` listens twice in each
#   peer namespace. A 4-leg multi-port run (2 legs per port, TCP, -P 4 each, DURATION s)
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
B=npu-board-$sfx P1=npu-pc1-$sfx P2=npu-pc2-$sfx
tmp=$(mktemp -d)
cleanup() {
    for ns in $B $P1 $P2; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    sleep 0.3
    for ns in $B $P1 $P2; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
for ns in $B $P1 $P2; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add eth0 netns "$B" type veth peer name eth0 netns "$P1"
ip link add eth1 netns "$B" type veth peer name eth0 netns "$P2"
ip -n "$B" addr add 192.0.2.1/24 dev eth0
ip -n "$P1" addr add 192.0.2.2/24 dev eth0
ip -n "$B" addr add 198.51.100.1/24 dev eth1
ip -n "$P2" addr add 198.51.100.2/24 dev eth0
for l in "$B eth0" "$B eth1" "$P1 eth0" "$P2 eth0"; do set -- $l; ip -n "$1" link set "$2" up; done
for ns in $P1 $P2; do
    for port in 5201 5202; do ip netns exec "$ns" iperf3 -s -p $port -D >/dev/null 2>&1; done
done
ip netns exec "$B" "$NETPERFD" daemon --listen 127.0.0.1:18080 --data "$tmp/data" \
    >"$tmp/daemon.log" 2>&1 &
sleep 2

ip netns exec "$B" python3 - "$tmp/daemon.log" "$DURATION" <<'PY'
import http.cookiejar, json, re, sys, time, urllib.parse, urllib.request
log, duration = open(sys.argv[1]).read(), int(sys.argv[2])
base = "http://127.0.0.1:18080"
code = re.search(r"setup code ([0-9A-Za-z-]+)", log).group(1)
jar = http.cookiejar.CookieJar()
op = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
form = urllib.parse.urlencode({"code": code, "password": "correct horse", "confirm": "correct horse"}).encode()
op.open(base + "/setup", form)
csrf = re.search(r'name="csrf" value="([^"]+)"', op.open(base + "/").read().decode()).group(1)
legs = [{"host": h, "port": str(p), "bind": d, "duration": str(duration), "parallel": "4"}
        for (h, d) in (("192.0.2.2", "eth0"), ("198.51.100.2", "eth1")) for p in (5201, 5202)]
req = urllib.request.Request(base + "/api/runs/multi", json.dumps({"legs": legs}).encode(),
                             {"Content-Type": "application/json", "X-CSRF-Token": csrf})
run = json.loads(op.open(req).read())
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
