#!/usr/bin/env bash
# benches/latency-clock.sh — cost and timing error of the latency prober's 10 ms clock.
#
# What it measures
#   `netperfd latency -c 127.0.0.1` (ICMP probes to loopback, answered by the kernel) with
#   a short upload load to a stock `iperf3 -s` on 127.0.0.1:PORT, twice:
#     idle  nothing else started by this script
#     busy  HOGS busy loops (`sh -c 'while :; do :; done'`, default 2) running meanwhile
#   and prints, from the run's `--json` document:
#     late p50/p99/max µs  how late the probe thread woke after each 10 ms deadline
#                          (probes.late_us: the scheduling error of the clock)
#     sent / skipped       probes sent; slots skipped because the thread woke > 1 interval late
#     cpu %                CPU of the prober's two threads, % of one core (getrusage per thread)
#     idle RTT p50/p99 ms  loopback ICMP RTT in the idle phase
#   Traffic goes to 127.0.0.1 only. Other processes (compiles) load the machine too: say so
#   when quoting the figures.
#
# Usage: benches/latency-clock.sh [IDLE_S] (default 20)   env: BIN, HOGS, PORT
set -euo pipefail
IDLE=${1:-20}
HOGS=${HOGS:-2}
PORT=${PORT:-5299}
BIN=${BIN:-}
if [ -z "$BIN" ]; then
  for b in target/release/netperfd target/debug/netperfd; do [ -x "$b" ] && BIN=$b && break; done
fi
[ -x "$BIN" ] || { echo "build netperfd first (cargo build --release)"; exit 1; }
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT
iperf3 -s -B 127.0.0.1 -p "$PORT" >/dev/null 2>&1 &
PIDS+=($!)
sleep 0.5

run() {
  "$BIN" latency -c 127.0.0.1 -p "$PORT" --load up --idle "$IDLE" --loaded 1 --json --data "$TMP/data" \
    | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["probes"]; l = p["late_us"]; r = d["idle"]["rtt_ms"]
print("%-5s late p50 %6.0f µs  p99 %6.0f µs  max %7.0f µs  sent %5d skipped %3d  cpu %.2f %%  idle RTT p50 %.3f p99 %.3f ms"
      % (sys.argv[1], l["p50"], l["p99"], l["max"], p["sent"], p["skipped"], p["cpu_percent"], r["p50"], r["p99"]))
' "$1"
}

echo "netperfd latency prober clock, 10 ms, ${IDLE}+1+${IDLE} s per run ($(nproc) cores, $BIN)"
run idle
for _ in $(seq "$HOGS"); do sh -c 'while :; do :; done' & PIDS+=($!); done
run busy
