#!/usr/bin/env bash
# benches/udp-load.sh — UDP pacing on a busy machine: netperfd's sender against stock
# iperf3's, side by side in one run.
#
# What it measures
#   Over one veth pair between two network namespaces that it creates (ns A = sender,
#   203.0.113.1; ns B = receiver, 203.0.113.2; documentation range, no route anywhere else),
#   a `netperfd -s -1 -J` receiver in B and a sender in A running
#   `-c B -u -b RATE -l LEN -t DURATION -J`. The receiving netperfd reports the busiest 1 ms
#   of arrivals (end.streams[0].udp.peak_1ms_bits_per_second, from kernel receive
#   timestamps), so both senders are judged by the same receiver.
#
#   Two phases, every combination REPEATS times (order reversed every other round):
#     loaded  HOGS busy loops (`sh -c 'while :; do :; done'`, default 2) run while netperfd
#             and iperf3 send at LOAD_RATE (100M)
#     idle    no busy loops: netperfd sends at IDLE_RATES (100M 400M 1000M)
#
#   Per run:
#     sent %       sender's end.sum_sent.bits_per_second / RATE × 100
#     received %   receiver's end.sum_received.bits_per_second / RATE × 100
#     peak ×       busiest 1 ms / RATE
#     pacing       the sender's end.pacing (netperfd only: how it paced)
#   The table shows every run and the median per tool and phase.
#
# Targets (issue 25 item 2; issue 11 before it)
#   loaded: netperfd sent ≥ 99 % of the rate in every run, busiest 1 ms at most half of
#           stock iperf3's in the same run (medians)
#   idle:   netperfd sent within 1 % of each rate
#   both:   the sender's own busiest 1 ms (`snd peak`, end.shortfall.sender_peak_1ms_ratio)
#           ≤ 1.9 × the rate in every idle run (engine::pacer::WINDOW_CAP) and ≤ 5.0 × in
#           every loaded one (the top of engine::pacer::CATCH_UP_CAPS); the receiver's figure
#           is printed beside it (its softirq bunches arrivals: up to ~2.1 × on an idle host)
#   One TARGET MET / TARGET MISSED line per target (on the medians). iperf3 has no target;
#   its figures are printed beside. Other processes (compiles) load the machine too: say so
#   when quoting the figures, and compare ratios from the same run.
#
# Usage: sudo benches/udp-load.sh          (root: it creates namespaces)
#   DURATION=5  REPEATS=3  LEN=1448  HOGS=2  LOAD_RATE=100M  IDLE_RATES="100M 400M 1000M"
#   PIN=N        run the sender and the busy loops on CPU N only (taskset), the receiver on
#                another CPU: the sender shares one core with HOGS busy loops (issue 25 item 2)
#   RECV_ON_PIN=1  with PIN: the receiver runs on CPU N too, so the sender, its receiver (and
#                the veth softirq) and the busy loops all share one core: a core short of CPU,
#                not just shared (issue 39 item 2)
#   NETPERFD=/path/to/netperfd   use this binary instead of building
#                (otherwise: cargo build --release --locked in CARGO_TARGET_DIR)
#   IPERF3=/usr/bin/iperf3
# Writes benches/results/udp-load-<UTC date>.json. Exits 0 even when targets are missed;
# non-zero only when the bench itself cannot run.
set -euo pipefail

DURATION=${DURATION:-5}
REPEATS=${REPEATS:-3}
LEN=${LEN:-1448}
HOGS=${HOGS:-2}
LOAD_RATE=${LOAD_RATE:-100M}
IDLE_RATES=${IDLE_RATES:-100M 400M 1000M}
IPERF3=${IPERF3:-/usr/bin/iperf3}
PORT_BASE=${PORT_BASE:-5601}
PIN=${PIN:-}
RECV_ON_PIN=${RECV_ON_PIN:-0}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "udp-load.sh: $*" >&2; exit 2; }

[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive integer"
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || die "REPEATS must be a positive integer"
[[ $LEN =~ ^[1-9][0-9]*$ ]] || die "LEN must be a positive integer"
[[ $HOGS =~ ^[0-9]+$ ]] || die "HOGS must be a number"
[[ $LOAD_RATE =~ ^[1-9][0-9]*[KMG]$ ]] || die "LOAD_RATE must look like 100M"
for r in $IDLE_RATES; do
    [[ $r =~ ^[1-9][0-9]*[KMG]$ ]] || die "IDLE_RATES must look like '100M 400M'"
done
sender_cpu=() receiver_cpu=()
if [[ -n $PIN ]]; then
    [[ $PIN =~ ^[0-9]+$ && $PIN -lt $(nproc) ]] || die "PIN must be a CPU number below $(nproc)"
    [[ $(nproc) -ge 2 ]] || die "PIN needs 2 CPUs (the receiver runs on another one)"
    command -v taskset >/dev/null || die "taskset (util-linux) not found"
    sender_cpu=(taskset -c "$PIN")
    receiver_cpu=(taskset -c "$(( (PIN + 1) % $(nproc) ))")
    [[ $RECV_ON_PIN == 1 ]] && receiver_cpu=(taskset -c "$PIN")
fi
[[ $RECV_ON_PIN == 0 || -n $PIN ]] || die "RECV_ON_PIN=1 needs PIN=N"
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces); try: sudo $0"
command -v ip >/dev/null || die "ip (iproute2) not found"
command -v ss >/dev/null || die "ss (iproute2) not found"
command -v python3 >/dev/null || die "python3 not found"
[[ -x $IPERF3 ]] || die "iperf3 not found at $IPERF3"

if [[ -n ${NETPERFD:-} ]]; then
    [[ -x $NETPERFD ]] || die "NETPERFD=$NETPERFD is not executable"
else
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
    echo "building netperfd (release) in $CARGO_TARGET_DIR ..." >&2
    (cd "$repo" && cargo build --release --locked --bin netperfd) >&2
    NETPERFD=$CARGO_TARGET_DIR/release/netperfd
fi
NETPERFD=$(readlink -f "$NETPERFD")
git_rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)

NSA=npbl-a-$$
NSB=npbl-b-$$
ADDR_A=203.0.113.1
ADDR_B=203.0.113.2
work=$(mktemp -d /tmp/npb-udpload.XXXXXX)
server_pid=
hog_pids=()

stop_hogs() {
    local p
    for p in "${hog_pids[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    hog_pids=()
}

cleanup() {
    local rc=$?
    set +e
    stop_hogs
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
    fi
    ip netns del "$NSA" 2>/dev/null
    ip netns del "$NSB" 2>/dev/null
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$NSA"
ip netns add "$NSB"
ip link add "npbl-va-$$" netns "$NSA" type veth peer name "npbl-vb-$$" netns "$NSB"
ip -n "$NSA" link set lo up
ip -n "$NSB" link set lo up
ip -n "$NSA" addr add "$ADDR_A/24" dev "npbl-va-$$"
ip -n "$NSB" addr add "$ADDR_B/24" dev "npbl-vb-$$"
ip -n "$NSA" link set "npbl-va-$$" up
ip -n "$NSB" link set "npbl-vb-$$" up
if command -v ping >/dev/null; then
    for _ in $(seq 50); do
        ip netns exec "$NSA" ping -c1 -W1 "$ADDR_B" >/dev/null 2>&1 && break
        sleep 0.1
    done
fi

start_hogs() {
    local i
    for ((i = 0; i < HOGS; i++)); do
        "${sender_cpu[@]}" sh -c 'while :; do :; done' &
        hog_pids+=($!)
    done
}

tool_bin() { case $1 in iperf3) echo "$IPERF3" ;; netperfd) echo "$NETPERFD" ;; esac; }

runs_file=$work/runs.jsonl
: >"$runs_file"
port=$PORT_BASE
runno=0

# run_one PHASE ROUND SENDER_TOOL RATE
run_one() {
    local phase=$1 round=$2 tool=$3 rate=$4 d crc=0
    runno=$((runno + 1))
    port=$((port + 1))
    d=$work/run-$runno
    mkdir -p "$d"
    "${receiver_cpu[@]}" ip netns exec "$NSB" timeout -k 5 $((DURATION + 60)) "$NETPERFD" -s -1 -p "$port" -J \
        >"$d/server.out" 2>"$d/server.err" &
    server_pid=$!
    for _ in $(seq 100); do
        ip netns exec "$NSB" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    "${sender_cpu[@]}" ip netns exec "$NSA" timeout -k 5 $((DURATION + 30)) "$(tool_bin "$tool")" -c "$ADDR_B" \
        -p "$port" -u -b "$rate" -l "$LEN" -t "$DURATION" -J \
        >"$d/client.out" 2>"$d/client.err" || crc=$?
    local waited=0
    while kill -0 "$server_pid" 2>/dev/null && [[ $waited -lt 100 ]]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    python3 - "$d" "$phase" "$round" "$tool" "$rate" "$crc" >>"$runs_file" <<'PY'
import json, sys
d, phase, rnd, tool, rate, crc = sys.argv[1:]
mult = {"K": 1e3, "M": 1e6, "G": 1e9}
target = float(rate[:-1]) * mult[rate[-1]]
rec = {"phase": phase, "round": int(rnd), "tool": tool, "rate": rate, "target": target,
       "client_exit": int(crc), "ok": False, "note": ""}
def load(p):
    try:
        with open(f"{d}/{p}") as f:
            return json.load(f)
    except Exception as e:
        rec["note"] += f"{p}: {e}; "
        return None
c, s = load("client.out"), load("server.out")
try:
    rec["sent_bps"] = c["end"]["sum_sent"]["bits_per_second"]
    rec["pacing"] = c["end"].get("pacing", "")
    rec["received_bps"] = s["end"]["sum_received"]["bits_per_second"]
    rec["peak_1ms_bps"] = s["end"]["streams"][0]["udp"]["peak_1ms_bits_per_second"]
    rec["sent_pct"] = rec["sent_bps"] * 100 / target
    rec["received_pct"] = rec["received_bps"] * 100 / target
    rec["peak_x"] = rec["peak_1ms_bps"] / target
    # The sender's own busiest 1 ms (netperfd's pacer reports it; stock iperf3 does not).
    rec["sender_peak_x"] = (c["end"].get("shortfall") or {}).get("sender_peak_1ms_ratio")
    rec["ok"] = True
except Exception as e:
    rec["note"] += f"missing field: {e!r}"
print(json.dumps(rec))
PY
}

echo "netperfd $git_rev ($NETPERFD) vs $($IPERF3 --version | head -n1); $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((round = 1; round <= REPEATS; round++)); do
    order=(netperfd iperf3)
    ((round % 2 == 0)) && order=(iperf3 netperfd)
    start_hogs
    sleep 0.5
    for tool in "${order[@]}"; do
        echo "round $round: loaded ($HOGS busy loops), $tool sends $LOAD_RATE" >&2
        run_one loaded "$round" "$tool" "$LOAD_RATE"
    done
    stop_hogs
    for rate in $IDLE_RATES; do
        echo "round $round: idle, netperfd sends $rate" >&2
        run_one idle "$round" netperfd "$rate"
    done
done

mkdir -p "$here/results"
out=$here/results/udp-load-$(date -u +%Y%m%dT%H%M%SZ).json
python3 - "$runs_file" "$out" "$git_rev" "$HOGS" "$DURATION" "$LEN" <<'PY'
import json, statistics, sys
runs_file, out, rev, hogs, dur, dlen = sys.argv[1:]
runs = [json.loads(l) for l in open(runs_file) if l.strip()]
print(f"{'phase':<7} {'rnd':>3} {'sender':<9} {'rate':>6} {'sent %':>8} {'recv %':>8} {'peak 1ms':>9} {'snd peak':>9}  pacing / note")
for r in runs:
    if r["ok"]:
        sp = f"{r['sender_peak_x']:8.2f}x" if r.get("sender_peak_x") is not None else f"{'-':>9}"
        print(f"{r['phase']:<7} {r['round']:>3} {r['tool']:<9} {r['rate']:>6} {r['sent_pct']:8.2f} {r['received_pct']:8.2f} {r['peak_x']:8.2f}x {sp}  {r.get('pacing','')}")
    else:
        print(f"{r['phase']:<7} {r['round']:>3} {r['tool']:<9} {r['rate']:>6} {'-':>8} {'-':>8} {'-':>9} {'-':>9}  {r['note']}")
print()
med = {}
for r in runs:
    if r["ok"]:
        med.setdefault((r["phase"], r["tool"], r["rate"]), []).append(r)
summary = []
print(f"median of {max(r['round'] for r in runs)} rounds:")
for (phase, tool, rate), rs in sorted(med.items()):
    m = {k: statistics.median(x[k] for x in rs) for k in ("sent_pct", "received_pct", "peak_x")}
    sps = [x["sender_peak_x"] for x in rs if x.get("sender_peak_x") is not None]
    m["sender_peak_max"] = max(sps) if sps else None
    m.update(phase=phase, tool=tool, rate=rate, runs=len(rs))
    summary.append(m)
    print(f"  {phase:<7} {tool:<9} {rate:>6}: sent {m['sent_pct']:.2f} %, received {m['received_pct']:.2f} %, busiest 1 ms {m['peak_x']:.2f} x the rate")
print()
def verdict(ok, text):
    print(("TARGET MET    " if ok else "TARGET MISSED ") + text)
stock_peak = {m["rate"]: m["peak_x"] for m in summary if m["phase"] == "loaded" and m["tool"] == "iperf3"}
for m in summary:
    if m["tool"] != "netperfd":
        continue
    legs = [r for r in runs if r["ok"] and r["phase"] == m["phase"] and r["tool"] == "netperfd" and r["rate"] == m["rate"]]
    low = sum(1 for r in legs if r["sent_pct"] < 99.0)
    if m["phase"] == "loaded":
        verdict(m["sent_pct"] >= 99.0 and low == 0,
                f"loaded {m['rate']}: netperfd sent {m['sent_pct']:.2f} % (≥ 99 %), {low} of {len(legs)} runs below 99 %")
        sp = stock_peak.get(m["rate"])
        if sp is not None:
            verdict(m["peak_x"] <= sp / 2,
                    f"loaded {m['rate']}: busiest 1 ms {m['peak_x']:.2f} x (≤ half of iperf3's {sp:.2f} x)")
    else:
        verdict(abs(m["sent_pct"] - 100) <= 1.0, f"idle {m['rate']}: netperfd sent {m['sent_pct']:.2f} % (within 1 %)")
    # The pacer's bound holds at the sender in every run (engine::pacer::WINDOW_CAP); the
    # receiver's busiest 1 ms (peak 1ms) is higher when its softirq bunches arrivals.
    # Loaded, a debt that keeps growing raises the bound to 3.4 x, then 5.0 x
    # (engine::pacer::CATCH_UP_CAPS: the rate first, issue 39 item 2).
    if m["sender_peak_max"] is not None:
        bound = 1.9 if m["phase"] == "idle" else 5.0
        verdict(m["sender_peak_max"] <= bound + 1e-9,
                f"{m['phase']} {m['rate']}: sender's busiest 1 ms ≤ {bound} x in every run (max {m['sender_peak_max']:.2f} x)")
json.dump({"git": rev, "hogs": int(hogs), "duration": int(dur), "len": int(dlen),
           "runs": runs, "medians": summary}, open(out, "w"), indent=1)
print(f"\nwritten: {out}")
PY
