#!/usr/bin/env bash
# The 1 Hz sampler's cost on a board-like port count: an idle `netperfd daemon` in a namespace
# with PORTS veth ports (each with a qdisc, as a board's ports have), its CPU time
# (utime + stime of /proc/PID/stat) over DURATION seconds after a warm-up, per second = per
# sample. The idle daemon does little else than the sampler (CPU, /proc/net/dev, the netlink
# port inventory and, since issue 24, the fast board counters: one qdisc dump, the ethtool
# statistics of each port, softnet_stat, cpufreq and thermal files). Give BASELINE (a netperfd
# built before issue 24) to get the extra cost as the difference.
#   usage: sudo [NETPERFD=bin] [BASELINE=bin] [DURATION=60] [PORTS=4] benches/sampler.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DURATION=${DURATION:-60}
PORTS=${PORTS:-4}
NETPERFD=${NETPERFD:-${CARGO_TARGET_DIR:-target}/debug/netperfd}
BASELINE=${BASELINE:-}
ns=npb-s-$$
tmp=$(mktemp -d)
cleanup() {
    [[ -n ${pid:-} ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    for i in $(seq 0 $((PORTS - 1))); do ip netns del "$ns-p$i" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
for i in $(seq 0 $((PORTS - 1))); do
    ip netns add "$ns-p$i"
    ip link add "sb$$-$i" type veth peer name "sp$$-$i"
    ip link set "sb$$-$i" netns "$ns" name "eth$i"
    ip link set "sp$$-$i" netns "$ns-p$i" name eth0
    ip -n "$ns" addr add "10.99.$i.1/24" dev "eth$i"
    ip -n "$ns" link set "eth$i" up
    ip -n "$ns-p$i" link set eth0 up
    # fq_codel as on most boards; where the kernel lacks it, pfifo_fast, else a TBF.
    ip netns exec "$ns" tc qdisc add dev "eth$i" root fq_codel 2>/dev/null ||
        ip netns exec "$ns" tc qdisc add dev "eth$i" root pfifo_fast 2>/dev/null ||
        ip netns exec "$ns" tc qdisc add dev "eth$i" root tbf rate 1gbit burst 32kb latency 50ms
done
tick=$(getconf CLK_TCK)

measure() { # binary label
    local bin=$1 label=$2
    rm -rf "$tmp/data"
    ip netns exec "$ns" "$bin" daemon --listen 127.0.0.1:18080 --data "$tmp/data" --iperf3-port 0 \
        >"$tmp/$label.log" 2>&1 &
    pid=$!
    sleep 5 # start-up and first readings
    local a b
    a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    sleep "$DURATION"
    b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
    python3 - "$label" "$a" "$b" "$tick" "$DURATION" <<'PY'
import sys
label, a, b, tick, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
cpu = (b - a) / tick
print(f"{label}: {cpu * 1000 / secs:.2f} ms CPU per second (= per sample), {cpu * 100 / secs:.3f} % of one core")
PY
}
echo "idle daemon, $PORTS ports ($(ip netns exec "$ns" tc qdisc show dev eth0 | cut -d" " -f2) root qdisc), ${DURATION} s"
measure "$NETPERFD" netperfd
[[ -n $BASELINE ]] && measure "$BASELINE" baseline
