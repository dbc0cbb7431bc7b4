#!/usr/bin/env bash
# benches/udp-big.sh — UDP datagrams up to 65,507 bytes on a 1500-byte path: netperfd and
# stock iperf3 side by side (issue 39, item 1).
#
# What it measures
#   One veth pair (MTU 1500) between two network namespaces it creates (A 203.0.113.1 /
#   2001:db8:39::1, B 203.0.113.2 / 2001:db8:39::2; documentation ranges, no route
#   anywhere else). For every -l of LENS and every -b of RATES:
#     fwd   TOOL -c in A → stock iperf3 -s -1 in B       (TOOL sends)
#     rev   stock iperf3 -c -R in A → TOOL -s -1 in B    (TOOL's server sends)
#   with TOOL = netperfd and TOOL = stock iperf3 (the reference, same run), plus, for
#   netperfd only, `v6` (fwd over IPv6) and `iperf2` (netperfd --iperf2 → stock iperf -s -u).
#   Per run: the exit codes, the sender's datagrams and bitrate, the receiver's total and
#   lost datagrams (from the receiving stock tool's own JSON / CSV where it is stock, from
#   netperfd's -J where netperfd receives the server's report).
#   Columns: sent % = sender bitrate / -b × 100; loss % = receiver lost / total; ok = exit
#   0 and no error in the JSON. A datagram larger than 1472 (IPv4) / 1452 (IPv6) bytes is
#   IP-fragmented on this path; every cell must run to the end.
#
# Usage: sudo benches/udp-big.sh
#   LENS="64 512 1448 1472 1473 2000 4000 8000 9000 16000 32000 65507"
#   RATES="50M 200M 400M"   DURATION=2
#   NETPERFD=/path/to/netperfd   (otherwise cargo build --release --locked)
#   IPERF3=   stock iperf3; default /opt/iperf3-3.21/bin/iperf3, else the stock peers'
#             newest (/var/cache/netperfd-stock-peers/bin/iperf3-newest), else /usr/bin/iperf3
#   IPERF2=/usr/bin/iperf   SETS="fwd rev v6 iperf2"
# Writes benches/results/udp-big-<UTC date>.json and prints one table. Exits 0 even when a
# cell fails (it is listed); non-zero only when the bench itself cannot run.
set -euo pipefail

LENS=${LENS:-64 512 1448 1472 1473 2000 4000 8000 9000 16000 32000 65507}
RATES=${RATES:-50M 200M 400M}
DURATION=${DURATION:-2}
SETS=${SETS:-fwd rev v6 iperf2}
IPERF2=${IPERF2:-/usr/bin/iperf}
PORT_BASE=${PORT_BASE:-5601}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
die() { echo "udp-big.sh: $*" >&2; exit 2; }

[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be a positive integer"
for l in $LENS; do [[ $l =~ ^[1-9][0-9]*$ ]] && ((l <= 65507)) || die "LENS: bad -l $l"; done
for r in $RATES; do [[ $r =~ ^[1-9][0-9]*[KMG]?$ ]] || die "RATES: bad -b $r"; done
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces); try: sudo $0"
command -v python3 >/dev/null || die "python3 not found"
command -v ss >/dev/null || die "ss (iproute2) not found"
if [[ -z ${IPERF3:-} ]]; then
    for c in /opt/iperf3-3.21/bin/iperf3 /var/cache/netperfd-stock-peers/bin/iperf3-newest /usr/bin/iperf3; do
        [[ -x $c ]] && { IPERF3=$c; break; }
    done
fi
[[ -x ${IPERF3:-} ]] || die "no iperf3 found (set IPERF3)"
if [[ -n ${NETPERFD:-} ]]; then
    [[ -x $NETPERFD ]] || die "NETPERFD=$NETPERFD is not executable"
else
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
    (cd "$repo" && cargo build --release --locked --bin netperfd) >&2
    NETPERFD=$CARGO_TARGET_DIR/release/netperfd
fi
NETPERFD=$(readlink -f "$NETPERFD")
git_rev=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)

NSA=npbg-a-$$
NSB=npbg-b-$$
A4=203.0.113.1 B4=203.0.113.2 A6=2001:db8:39::1 B6=2001:db8:39::2
work=$(mktemp -d /tmp/npb-udpbig.XXXXXX)
bg=()
cleanup() {
    local rc=$?
    set +e
    for p in "${bg[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
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
ip link add "npbg-va-$$" netns "$NSA" type veth peer name "npbg-vb-$$" netns "$NSB"
for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
ip -n "$NSA" addr add "$A4/24" dev "npbg-va-$$"
ip -n "$NSB" addr add "$B4/24" dev "npbg-vb-$$"
ip -n "$NSA" addr add "$A6/64" dev "npbg-va-$$" nodad
ip -n "$NSB" addr add "$B6/64" dev "npbg-vb-$$" nodad
ip -n "$NSA" link set "npbg-va-$$" mtu 1500 up
ip -n "$NSB" link set "npbg-vb-$$" mtu 1500 up

runs=$work/runs.jsonl
: >"$runs"
port=$PORT_BASE

wait_tcp() { # ns port
    for _ in $(seq 100); do
        ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

# one SET TOOL LEN RATE: one run; appends a JSON line to $runs
one() {
    local set=$1 tool=$2 len=$3 rate=$4 d crc=0 src=0 spid
    port=$((port + 1))
    d=$work/$set-$tool-$len-$rate
    mkdir -p "$d"
    local tbin=$NETPERFD
    [[ $tool == iperf3 ]] && tbin=$IPERF3
    case $set in
    fwd | v6)
        local dst=$B4
        [[ $set == v6 ]] && dst=$B6
        ip netns exec "$NSB" timeout -k 2 $((DURATION + 30)) "$IPERF3" -s -1 -J -p "$port" \
            >"$d/recv.out" 2>"$d/recv.err" &
        spid=$!
        bg+=("$spid")
        wait_tcp "$NSB" "$port" || true
        ip netns exec "$NSA" timeout -k 2 $((DURATION + 20)) "$tbin" -c "$dst" -p "$port" -u \
            -l "$len" -b "$rate" -t "$DURATION" -J >"$d/send.out" 2>"$d/send.err" || crc=$?
        wait "$spid" || src=$?
        ;;
    rev)
        ip netns exec "$NSB" timeout -k 2 $((DURATION + 30)) "$tbin" -s -1 -J -p "$port" \
            >"$d/send.out" 2>"$d/send.err" &
        spid=$!
        bg+=("$spid")
        wait_tcp "$NSB" "$port" || true
        ip netns exec "$NSA" timeout -k 2 $((DURATION + 20)) "$IPERF3" -c "$B4" -p "$port" -u -R \
            -l "$len" -b "$rate" -t "$DURATION" -J >"$d/recv.out" 2>"$d/recv.err" || crc=$?
        wait "$spid" || src=$?
        ;;
    iperf2)
        ip netns exec "$NSB" timeout -k 2 $((DURATION + 30)) "$IPERF2" -s -u -l 65507 -p "$port" -y C \
            >"$d/recv.out" 2>"$d/recv.err" &
        spid=$!
        bg+=("$spid")
        sleep 0.3
        ip netns exec "$NSA" timeout -k 2 $((DURATION + 20)) "$NETPERFD" -c "$B4" -p "$port" \
            --iperf2 -u -l "$len" -b "$rate" -t "$DURATION" -J >"$d/send.out" 2>"$d/send.err" || crc=$?
        sleep 0.3
        kill "$spid" 2>/dev/null || true
        wait "$spid" 2>/dev/null || true
        ;;
    esac
    python3 - "$d" "$set" "$tool" "$len" "$rate" "$crc" "$src" >>"$runs" <<'PY'
import json, os, sys
d, rset, tool, ln, rate, crc, src = sys.argv[1:]
def read(p):
    try:
        return open(os.path.join(d, p), errors="replace").read()
    except FileNotFoundError:
        return ""
def js(p):
    t = read(p)
    try:
        return json.loads(t[t.index("{"):]) if rset != "iperf2" or p != "send.out" else \
            json.loads(next(l for l in t.splitlines() if l.startswith("{")))
    except Exception:
        return None
mult = {"K": 1e3, "M": 1e6, "G": 1e9}
asked = float(rate[:-1]) * mult[rate[-1]] if rate[-1] in mult else float(rate)
rec = {"set": rset, "tool": tool, "len": int(ln), "rate": rate, "exit": [int(crc), int(src)],
       "ok": False, "error": None}
s, r = js("send.out"), js("recv.out")
err = [x.get("error") for x in (s, r) if isinstance(x, dict) and x.get("error")]
err += [l for l in (read("send.err") + read("recv.err")).splitlines()
        if "error" in l.lower() or "failed" in l.lower()]
try:
    if rset == "iperf2":
        st = s["outcome"]["streams"][0]
        rec["sent"] = st["sent_datagrams"]
        rec["sent_bps"] = rec["sent"] * int(ln) * 8 / float(st.get("seconds") or os.environ.get("DUR", 1) or 1)
        rec["total"], rec["lost"] = st["udp"]["total"], st["udp"]["lost"]
    else:
        sr = r["end"]["sum_received"]
        ss = s["end"]["sum_sent"]
        rec["sent"], rec["sent_bps"] = ss["packets"], ss["bits_per_second"]
        rec["total"], rec["lost"] = sr["packets"], sr["lost_packets"]
        rec["recv_bytes"] = sr["bytes"]
        rec["gso_note"] = s["end"].get("udp_gso")
    rec["sent_pct"] = rec["sent_bps"] * 100 / asked
    rec["loss_pct"] = rec["lost"] * 100 / rec["total"] if rec["total"] else 100.0
    rec["ok"] = int(crc) == 0 and int(src) in (0, 143, -15) and not err
except Exception as e:
    err.append(f"no figures: {type(e).__name__} {e}")
rec["error"] = "; ".join(str(e) for e in err)[:300] or None
print(json.dumps(rec))
PY
}

echo "netperfd $NETPERFD ($git_rev), iperf3 $IPERF3 ($("$IPERF3" -v | head -n1)), ${DURATION}s per run" >&2
for set in $SETS; do
    tools="netperfd iperf3"
    [[ $set == v6 || $set == iperf2 ]] && tools=netperfd
    for len in $LENS; do
        [[ $set == iperf2 ]] && ((len < 36)) && continue
        for rate in $RATES; do
            for tool in $tools; do
                DUR=$DURATION one "$set" "$tool" "$len" "$rate"
            done
        done
    done
done

mkdir -p "$repo/benches/results"
out=$repo/benches/results/udp-big-$(date -u +%Y%m%dT%H%M%SZ).json
python3 - "$runs" "$out" "$NETPERFD" "$IPERF3" "$git_rev" <<'PY'
import json, sys
runs_f, out, npd, ip3, rev = sys.argv[1:]
runs = [json.loads(l) for l in open(runs_f) if l.strip()]
json.dump({"netperfd": npd, "iperf3": ip3, "git": rev, "runs": runs}, open(out, "w"), indent=1)
f = lambda v, p: "-" if v is None else format(v, p)
print(f"{'set':6} {'-l':>6} {'-b':>5} | {'netperfd sent%':>14} {'loss%':>6} {'ok':>3} | {'iperf3 sent%':>12} {'loss%':>6} {'ok':>3}")
key = lambda r: (r["set"], r["len"], r["rate"])
cells = {}
for r in runs:
    cells.setdefault(key(r), {})[r["tool"]] = r
bad = []
for k in sorted(cells, key=lambda k: (["fwd", "rev", "v6", "iperf2"].index(k[0]), k[1], float(k[2][:-1]))):
    row = cells[k]
    line = f"{k[0]:6} {k[1]:>6} {k[2]:>5} |"
    for t in ("netperfd", "iperf3"):
        r = row.get(t)
        if r is None:
            line += f" {'':>14} {'':>6} {'':>3} |" if t == "netperfd" else ""
            continue
        w = 14 if t == "netperfd" else 12
        line += f" {f(r.get('sent_pct'), '.1f'):>{w}} {f(r.get('loss_pct'), '.2f'):>6} {'yes' if r['ok'] else 'NO':>3} |"
        if not r["ok"]:
            bad.append(f"{t} {k}: exit {r['exit']} {r['error']}")
    print(line.rstrip("|"))
print(f"{sum(r['ok'] for r in runs)}/{len(runs)} runs ok; results in {out}")
for b in bad:
    print("FAILED:", b)
PY
