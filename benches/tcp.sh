#!/usr/bin/env bash
# benches/tcp.sh — TCP throughput and CPU cost: netperfd against stock iperf3.
#
# What it measures
#   In one run, over one veth pair between two network namespaces that it creates
#   (ns A = client, 203.0.113.1; ns B = server, 203.0.113.2; documentation range, no
#   route anywhere else), four client→server combinations:
#       iperf3→iperf3 (the baseline), netperfd→netperfd, netperfd→iperf3, iperf3→netperfd
#   each with one stream (-P 1) and four (-P 4), client sending (no -R), for
#   DURATION seconds, REPEATS times. Every round runs every combination; the order is
#   reversed every other round so slow drift (thermal, page cache, noisy neighbours)
#   hits both tools alike. Every run gets a fresh `-s -1` server on a fresh port.
#
#   Per run:
#     bitrate        receiver bits/s from the client's -J (end.sum_received.bits_per_second)
#     sender CPU     user+system CPU seconds of the client process (its rusage, via
#                    /usr/bin/time) divided by GB sent     (end.sum_sent.bytes / 1e9)
#     receiver CPU   user+system CPU seconds of the server process, divided by GB
#                    received (end.sum_received.bytes / 1e9)
#   The table shows the median of the repeats of each, and ratios against the
#   iperf3→iperf3 median of the same stream count.
#
# How to read it
#   Bitrate ratio = netperfd / iperf3: ≥ 1.00 is as fast or faster.
#   CPU ratio     = netperfd / iperf3 CPU s per GB: ≤ 1.00 is as cheap or cheaper.
#   Target (from the issue): netperfd at least iperf3's bitrate and at most iperf3's
#   CPU per GB. One TARGET MET / TARGET MISSED line per netperfd combination checks the
#   bitrate and the CPU of the side(s) that netperfd plays (sender, receiver or both).
#   Sender and receiver share the machine's CPUs over veth, so absolute numbers drift
#   between runs and machines; compare ratios from the same run. See benches/README.md.
#
# Usage: sudo benches/tcp.sh          (root: it creates namespaces)
#   DURATION=5   seconds per test (-t)
#   REPEATS=3    rounds
#   NETPERFD=/path/to/netperfd   use this binary instead of building
#                (otherwise: cargo build --release --locked, in CARGO_TARGET_DIR,
#                 default <repo>/target, i.e. /work/main/target)
#   IPERF3=/usr/bin/iperf3
# Writes benches/results/tcp-<UTC date>.json. Exits 0 even when targets are missed;
# non-zero only when the bench itself cannot run.
set -euo pipefail

DURATION=${DURATION:-5}
REPEATS=${REPEATS:-3}
IPERF3=${IPERF3:-/usr/bin/iperf3}
PORT_BASE=${PORT_BASE:-5301}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "tcp.sh: $*" >&2; exit 2; }

[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive integer"
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || die "REPEATS must be a positive integer"
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces); try: sudo $0"
command -v ip >/dev/null || die "ip (iproute2) not found"
command -v ss >/dev/null || die "ss (iproute2) not found"
command -v python3 >/dev/null || die "python3 not found"
[[ -x $IPERF3 ]] || die "iperf3 not found at $IPERF3"
if [[ ! -x /usr/bin/time ]]; then
    echo "tcp.sh: /usr/bin/time missing, installing the 'time' package" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q time >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q time >/dev/null; } \
        || die "could not install 'time'"
fi

# --- netperfd binary ---------------------------------------------------------------
if [[ -n ${NETPERFD:-} ]]; then
    [[ -x $NETPERFD ]] || die "NETPERFD=$NETPERFD is not executable"
else
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
    echo "building netperfd (release) in $CARGO_TARGET_DIR ..." >&2
    (cd "$repo" && cargo build --release --locked --bin netperfd) >&2
    NETPERFD=$CARGO_TARGET_DIR/release/netperfd
fi
NETPERFD=$(readlink -f "$NETPERFD")

# --- topology -----------------------------------------------------------------------
NSA=npb-a-$$
NSB=npb-b-$$
ADDR_A=203.0.113.1
ADDR_B=203.0.113.2
work=$(mktemp -d /tmp/npb-tcp.XXXXXX)
server_pid=

cleanup() {
    local rc=$?
    set +e
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        # the server runs as: time -> timeout -> tool; end the tool, then the wrappers
        pkill -TERM -P "$(pgrep -P "$server_pid" | head -n1)" 2>/dev/null
        pkill -TERM -P "$server_pid" 2>/dev/null
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
ip link add "npb-va-$$" netns "$NSA" type veth peer name "npb-vb-$$" netns "$NSB"
ip -n "$NSA" link set lo up
ip -n "$NSB" link set lo up
ip -n "$NSA" addr add "$ADDR_A/24" dev "npb-va-$$"
ip -n "$NSB" addr add "$ADDR_B/24" dev "npb-vb-$$"
ip -n "$NSA" link set "npb-va-$$" up
ip -n "$NSB" link set "npb-vb-$$" up
# sanity: B answers on the veth before we start
if command -v ping >/dev/null; then
    for _ in $(seq 50); do
        ip netns exec "$NSA" ping -c1 -W1 "$ADDR_B" >/dev/null 2>&1 && break
        sleep 0.1
    done
fi

# --- one run ------------------------------------------------------------------------
tool_bin() { case $1 in iperf3) echo "$IPERF3" ;; netperfd) echo "$NETPERFD" ;; esac; }

runs_file=$work/runs.jsonl
: >"$runs_file"
port=$PORT_BASE
runno=0

# run_one ROUND CLIENT_TOOL SERVER_TOOL STREAMS
run_one() {
    local round=$1 ctool=$2 stool=$3 streams=$4
    local cbin sbin d src crc
    cbin=$(tool_bin "$ctool")
    sbin=$(tool_bin "$stool")
    runno=$((runno + 1))
    port=$((port + 1))
    d=$work/run-$runno
    mkdir -p "$d"

    # server in B: time -> timeout -> server (timeout bounds a hung server)
    ip netns exec "$NSB" /usr/bin/time -o "$d/server.time" -f '%U %S' \
        timeout -k 5 $((DURATION + 60)) "$sbin" -s -1 -p "$port" -J \
        >"$d/server.out" 2>"$d/server.err" &
    server_pid=$!
    local ready=0
    for _ in $(seq 100); do
        if ip netns exec "$NSB" ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
            ready=1
            break
        fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [[ $ready -eq 0 ]]; then
        echo "server_not_listening" >"$d/note"
    fi

    # client in A
    crc=0
    ip netns exec "$NSA" /usr/bin/time -o "$d/client.time" -f '%U %S' \
        timeout -k 5 $((DURATION + 30)) "$cbin" -c "$ADDR_B" -p "$port" \
        -t "$DURATION" -P "$streams" -J \
        >"$d/client.out" 2>"$d/client.err" || crc=$?

    # the -1 server exits by itself after the test; give it a few seconds
    local waited=0
    while kill -0 "$server_pid" 2>/dev/null && [[ $waited -lt 100 ]]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$server_pid" 2>/dev/null; then
        echo "server_did_not_exit_after_test" >>"$d/note"
        pkill -TERM -P "$(pgrep -P "$server_pid" | head -n1)" 2>/dev/null || true
    fi
    src=0
    wait "$server_pid" || src=$?
    server_pid=

    python3 - "$d" "$round" "$ctool" "$stool" "$streams" "$crc" "$src" "$port" \
        >>"$runs_file" <<'PY'
import json, os, sys
d, rnd, ctool, stool, streams, crc, src, port = sys.argv[1:]
rec = {"round": int(rnd), "client": ctool, "server": stool, "streams": int(streams),
       "port": int(port), "client_exit": int(crc), "server_exit": int(src),
       "anomalies": [], "ok": False}
A = rec["anomalies"]
def read(p):
    try:
        with open(os.path.join(d, p), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
def cpu(p, who):
    t = read(p).strip().splitlines()
    # GNU time writes "Command exited with non-zero status N" before the format line
    for line in t[:-1]:
        if line.startswith("Command exited with non-zero status"):
            continue  # already reported from the exit code
        A.append(f"{who} ({ctool if who == 'client' else stool}): time says: {line}")
    try:
        u, s = map(float, t[-1].split())
        return u, s
    except Exception:
        A.append(f"{who}: no rusage from /usr/bin/time: {t!r}")
        return None
for n in read("note").split():
    A.append(f"{n} ({stool})")
if rec["client_exit"] != 0:
    A.append(f"client ({ctool}) exited {crc}")
if rec["server_exit"] != 0:
    A.append(f"server ({stool}) exited {src}")
for who, tool in (("client", ctool), ("server", stool)):
    err = read(f"{who}.err").strip()
    if err:
        A.append(f"{who} ({tool}) stderr: {err[:500]}")
cj = None
raw = read("client.out")
try:
    cj = json.loads(raw)
except Exception as e:
    A.append(f"client ({ctool}) -J output did not parse: {e}; starts {raw[:200]!r}")
sraw = read("server.out")
try:
    sj = json.loads(sraw)
    if isinstance(sj, dict) and sj.get("error"):
        A.append(f"server ({stool}) JSON error: {sj['error']}")
except Exception as e:
    A.append(f"server ({stool}) -J output did not parse: {e}; starts {sraw[:200]!r}")
ccpu, scpu = cpu("client.time", "client"), cpu("server.time", "server")
if isinstance(cj, dict):
    if cj.get("error"):
        A.append(f"client ({ctool}) JSON error: {cj['error']}")
    end = cj.get("end") or {}
    ss, sr = end.get("sum_sent") or {}, end.get("sum_received") or {}
    try:
        sent, recv = int(ss["bytes"]), int(sr["bytes"])
        bps = float(sr["bits_per_second"])
        rec.update(bytes_sent=sent, bytes_received=recv, bits_per_second=bps,
                   seconds_received=sr.get("seconds"))
        cu = end.get("cpu_utilization_percent")
        if cu is not None:
            rec["self_reported_cpu_percent"] = cu
        if sent <= 0 or recv <= 0:
            A.append(f"client ({ctool}) JSON: zero bytes sent={sent} received={recv}")
        elif ccpu and scpu:
            rec.update(client_cpu_user=ccpu[0], client_cpu_sys=ccpu[1],
                       server_cpu_user=scpu[0], server_cpu_sys=scpu[1],
                       sender_cpu_s_per_gb=(ccpu[0] + ccpu[1]) / (sent / 1e9),
                       receiver_cpu_s_per_gb=(scpu[0] + scpu[1]) / (recv / 1e9))
            rec["ok"] = not cj.get("error")
    except (KeyError, TypeError, ValueError) as e:
        if not cj.get("error"):
            A.append(f"client ({ctool}) JSON lacks end.sum_sent/sum_received: {e!r}")
print(json.dumps(rec))
PY
    python3 - "$runs_file" <<'PY' >&2
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
tag = f"  round {r['round']} {r['client']:>8}->{r['server']:<8} -P {r['streams']}:"
if r["ok"]:
    print(f"{tag} {r['bits_per_second']/1e9:7.2f} Gbit/s  "
          f"snd {r['sender_cpu_s_per_gb']:.3f} s/GB  rcv {r['receiver_cpu_s_per_gb']:.3f} s/GB")
else:
    print(f"{tag} FAILED")
for a in r["anomalies"]:
    print(f"    anomaly: {a}")
PY
}

# --- the rounds ---------------------------------------------------------------------
combos=("iperf3 iperf3" "netperfd netperfd" "netperfd iperf3" "iperf3 netperfd")
echo "netperfd: $NETPERFD ($("$NETPERFD" -v 2>/dev/null | head -n1 || echo '?'))" >&2
echo "iperf3:   $IPERF3 ($("$IPERF3" -v 2>/dev/null | head -n1 || echo '?'))" >&2
echo "DURATION=$DURATION REPEATS=$REPEATS, $(( ${#combos[@]} * 2 * REPEATS )) runs" >&2
for round in $(seq "$REPEATS"); do
    if (( round % 2 == 1 )); then order=(0 1 2 3); else order=(3 2 1 0); fi
    for streams in 1 4; do
        for i in "${order[@]}"; do
            read -r c s <<<"${combos[$i]}"
            run_one "$round" "$c" "$s" "$streams"
        done
    done
done

# --- summary ------------------------------------------------------------------------
mkdir -p "$here/results"
[[ -f $here/results/.gitignore ]] || printf '*.json\n' >"$here/results/.gitignore"
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
out_json=$here/results/tcp-$stamp.json
git_rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
git_dirty=$(git -C "$repo" status --porcelain 2>/dev/null | grep -q . && echo true || echo false)

NPB_STAMP=$stamp NPB_DURATION=$DURATION NPB_REPEATS=$REPEATS NPB_NETPERFD=$NETPERFD \
NPB_NETPERFD_VERSION=$("$NETPERFD" -v 2>/dev/null | head -n1 || true) \
NPB_IPERF3=$IPERF3 NPB_IPERF3_VERSION=$("$IPERF3" -v 2>/dev/null | head -n1 || true) \
NPB_GIT_REV=$git_rev NPB_GIT_DIRTY=$git_dirty NPB_TOPOLOGY="veth between netns A ($ADDR_A, client) and B ($ADDR_B, server)" \
python3 - "$runs_file" "$out_json" <<'PY'
import json, statistics, sys, platform, os
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
E = os.environ
meta = {
    "date_utc": E["NPB_STAMP"], "duration_s": int(E["NPB_DURATION"]), "repeats": int(E["NPB_REPEATS"]),
    "netperfd": E["NPB_NETPERFD"], "netperfd_version": E["NPB_NETPERFD_VERSION"],
    "iperf3": E["NPB_IPERF3"], "iperf3_version": E["NPB_IPERF3_VERSION"],
    "git_rev": E["NPB_GIT_REV"], "git_dirty": E["NPB_GIT_DIRTY"] == "true",
    "kernel": platform.release(), "cpus": os.cpu_count(), "topology": E["NPB_TOPOLOGY"],
}
combos = [("iperf3", "iperf3"), ("netperfd", "netperfd"), ("netperfd", "iperf3"), ("iperf3", "netperfd")]
def med(xs):
    return statistics.median(xs) if xs else None
summary = []
for p in (1, 4):
    for c, s in combos:
        ok = [r for r in runs if r["client"] == c and r["server"] == s and r["streams"] == p and r["ok"]]
        n = len([r for r in runs if r["client"] == c and r["server"] == s and r["streams"] == p])
        summary.append({
            "client": c, "server": s, "streams": p, "runs": n, "ok_runs": len(ok),
            "gbit_per_s": med([r["bits_per_second"] / 1e9 for r in ok]),
            "sender_cpu_s_per_gb": med([r["sender_cpu_s_per_gb"] for r in ok]),
            "receiver_cpu_s_per_gb": med([r["receiver_cpu_s_per_gb"] for r in ok]),
        })
def base(p):
    return next(x for x in summary if x["client"] == "iperf3" and x["server"] == "iperf3" and x["streams"] == p)
def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None
for x in summary:
    b = base(x["streams"])
    x["ratio_bitrate"] = ratio(x["gbit_per_s"], b["gbit_per_s"])
    x["ratio_sender_cpu"] = ratio(x["sender_cpu_s_per_gb"], b["sender_cpu_s_per_gb"])
    x["ratio_receiver_cpu"] = ratio(x["receiver_cpu_s_per_gb"], b["receiver_cpu_s_per_gb"])

def f(v, fmt):
    return "-" if v is None else format(v, fmt)
hdr = (f"{'client -> server':<22}{'-P':>3}{'ok':>5}{'Gbit/s':>9}{'snd s/GB':>10}{'rcv s/GB':>10}"
       f"{'x bitrate':>11}{'x snd CPU':>11}{'x rcv CPU':>11}")
print()
print(f"TCP, {meta['duration_s']} s x {meta['repeats']} repeats, medians; ratios vs iperf3->iperf3 of the same -P")
print(hdr)
print("-" * len(hdr))
for x in summary:
    name = f"{x['client']} -> {x['server']}"
    print(f"{name:<22}{x['streams']:>3}{str(x['ok_runs'])+'/'+str(x['runs']):>5}"
          f"{f(x['gbit_per_s'], '.2f'):>9}{f(x['sender_cpu_s_per_gb'], '.3f'):>10}"
          f"{f(x['receiver_cpu_s_per_gb'], '.3f'):>10}{f(x['ratio_bitrate'], '.2f'):>11}"
          f"{f(x['ratio_sender_cpu'], '.2f'):>11}{f(x['ratio_receiver_cpu'], '.2f'):>11}")
print()
targets = []
for x in summary:
    if x["client"] == "iperf3" and x["server"] == "iperf3":
        continue
    checks = [("bitrate", x["ratio_bitrate"], ">=")]
    if x["client"] == "netperfd":
        checks.append(("sender CPU/GB", x["ratio_sender_cpu"], "<="))
    if x["server"] == "netperfd":
        checks.append(("receiver CPU/GB", x["ratio_receiver_cpu"], "<="))
    parts, met = [], True
    for what, v, op in checks:
        good = v is not None and (v >= 1.0 if op == ">=" else v <= 1.0)
        met = met and good
        parts.append(f"{what} {f(v, '.2f')}x {op} 1.00x{'' if good else ' (missed)'}")
    name = f"{x['client']} -> {x['server']} -P {x['streams']}"
    line = f"TARGET {'MET   ' if met else 'MISSED'} {name:<30} " + "; ".join(parts)
    print(line)
    targets.append({"client": x["client"], "server": x["server"], "streams": x["streams"],
                    "met": met, "checks": [{"metric": w, "ratio": v, "op": o} for w, v, o in checks]})
anoms = [(r, a) for r in runs for a in r["anomalies"]]
if anoms:
    print()
    print(f"anomalies ({len(anoms)}):")
    for r, a in anoms:
        print(f"  round {r['round']} {r['client']}->{r['server']} -P {r['streams']}: {a}")
doc = {"meta": meta, "summary": summary, "targets": targets, "runs": runs}
with open(sys.argv[2], "w") as fh:
    json.dump(doc, fh, indent=2)
    fh.write("\n")
print()
print(f"results: {os.path.relpath(sys.argv[2])}")
PY
