#!/usr/bin/env bash
# benches/iperf2-trip.sh — receive cost of an iperf 2 TCP server with and without a
# --trip-times client: CPU seconds per GB received (server process utime+stime from
# /proc, 10 ms ticks) for a stock 2.1.8 client (`iperf -c`) sending DUR seconds to
#   netperfd -s --iperf2 (plain, --trip-times)  and  stock `iperf -s` (plain, --trip-times),
# in one run, REP rounds, over a veth pair between two namespaces it makes (npt-tbA
# 10.77.0.1, npt-tbB 10.77.0.2). Optional BEFORE=/path/netperfd adds a plain row for another
# build (e.g. main) to compare the plain path. Root only. Numbers are noisy on a shared
# host: compare medians of one run.
# Usage: sudo NETPERFD=target/debug/netperfd DUR=3 REP=3 benches/iperf2-trip.sh
set -u
AFTER=${NETPERFD:-target/debug/netperfd}; BEFORE=${BEFORE:-}; DUR=${DUR:-3}; REP=${REP:-3}
A=npt-tbA; B=npt-tbB
ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null
ip netns add $A; ip netns add $B
ip link add tbA netns $A type veth peer name tbB netns $B
ip -n $A addr add 10.77.0.1/24 dev tbA; ip -n $B addr add 10.77.0.2/24 dev tbB
ip -n $A link set tbA up; ip -n $B link set tbB up; ip -n $A link set lo up; ip -n $B link set lo up
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
run() { # name server-cmd client-extra
  local name=$1 srv=$2 extra=$3 port=$4
  ip netns exec $B $srv -p $port >/dev/null 2>&1 &
  local sp=$!; sleep 0.7
  local pid=$(pgrep -P $sp | head -1); [ -z "$pid" ] && pid=$sp
  local t0=$(ticks $pid)
  local out=$(ip netns exec $A iperf -c 10.77.0.2 -p $port -t $DUR $extra -y C 2>/dev/null | tail -1)
  sleep 0.5
  local t1=$(ticks $pid)
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
  local bytes=$(echo "$out" | cut -d, -f8)
  python3 -c "b=$bytes; c=($t1-$t0)/100; print(f'$name gbit/s={b*8/$DUR/1e9:.2f} cpu_s={c:.2f} cpu_s_per_GB={c/(b/1e9):.3f}')"
}
port=6100
for r in $(seq $REP); do
  rows=()
  [ -n "$BEFORE" ] && rows+=("before-plain|$BEFORE -s --iperf2|")
  for c in "${rows[@]}" "after-plain|$AFTER -s --iperf2|" "after-trip|$AFTER -s --iperf2|--trip-times" "stock218-plain|iperf -s|" "stock218-trip|iperf -s|--trip-times"; do
    IFS='|' read -r n s e <<< "$c"; port=$((port+1)); run "$n" "$s" "$e" $port
  done
done
ip netns del $A; ip netns del $B
