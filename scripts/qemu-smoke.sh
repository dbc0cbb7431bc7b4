#!/usr/bin/env bash
# Smoke-test a cross-built netperfd binary under qemu-user on x86_64 (no board needed):
#   1. BINARY --version
#   2. BINARY daemon --listen 127.0.0.1:18080 --data <tmp>; the web UI (/login or /setup)
#      must answer with HTML
#   3. stock `iperf3 -s -1` on loopback, `BINARY -c 127.0.0.1 -p 15201 -t 2 -J` against it;
#      the JSON must report end.sum_received.bytes > 0
#   4. the same with `-u -b 10M`: the paced sender must reach 10 Mbit/s (received 9.5–10.5,
#      under 1 % lost). On armv7 a prctl(PR_SET_TIMERSLACK) given 64-bit varargs once left a
#      garbage timer slack and paced sends ran at 0.4–8 % of the rate; qemu-user passes the
#      guest's registers to the host's prctl, so this catches it here.
# aarch64 runs under qemu-aarch64-static without -L (the multiarch libc6:arm64 that its Rust
# toolchain already needs). armv7 runs under qemu-arm-static with the cross libc that
# cross-build.sh installs (libc6-armhf-cross): `-L /usr/arm-linux-gnueabihf` plus
# `-E LD_LIBRARY_PATH=` its lib/ (loader and libc from one build; -L alone makes threaded
# programs crash), so the host's dpkg never needs the armhf architecture.
# Installs qemu-user-static, the libc, iperf3 and curl when missing (root).
# Loopback only. Everything started here is stopped on exit.
#   usage: qemu-smoke.sh BINARY        (ports: SMOKE_HTTP_PORT=18080 SMOKE_IPERF_PORT=15201)
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 BINARY" >&2; exit 2; }
[[ -f $1 && -r $1 ]] || { echo "qemu-smoke: no such file: $1" >&2; exit 2; }
bin=$(readlink -f -- "$1")
http_port=${SMOKE_HTTP_PORT:-18080}
iperf_port=${SMOKE_IPERF_PORT:-15201}
[[ $http_port =~ ^[0-9]+$ && $iperf_port =~ ^[0-9]+$ ]] || { echo "qemu-smoke: ports must be numbers" >&2; exit 2; }

log() { echo "qemu-smoke: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

# ELF e_machine (bytes 18-19, little endian): 0xb7 = aarch64, 0x28 = arm.
[[ $(head -c 4 -- "$bin" | od -An -c | tr -d ' ') == '177ELF' ]] || fail "$bin is not an ELF file"
machine=$(od -An -tx1 -j18 -N2 -- "$bin" | tr -d ' \n')
case $machine in
    b700) qemu=(qemu-aarch64-static); arch=arm64; libc="libc6:arm64" ;;
    2800) qemu=(qemu-arm-static -L /usr/arm-linux-gnueabihf -E LD_LIBRARY_PATH=/usr/arm-linux-gnueabihf/lib)
        arch=; libc=libc6-armhf-cross ;;
    *) fail "unsupported ELF machine 0x$machine (want aarch64 or arm)" ;;
esac

is_installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }
missing=()
for p in qemu-user-static "$libc" iperf3 curl python3 iproute2; do
    is_installed "$p" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ -n $arch ]] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then dpkg --add-architecture "$arch"; fi
    apt-get update -q || log "apt-get update failed (continuing; checking the install instead)"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" || true
    for p in "${missing[@]}"; do is_installed "$p" || fail "could not install $p"; done
fi

work=$(mktemp -d)
data=$(mktemp -d)
daemon_pid=
iperf_pid=
stop() { # stop PID: TERM, then KILL after 5 s
    local pid=$1 i
    [[ -n $pid ]] || return 0
    kill "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    stop "$daemon_pid"
    stop "$iperf_pid"
    if ((rc != 0)); then
        for f in "$work"/*.log; do
            [[ -s $f ]] || continue
            echo "---- ${f##*/} (last 30 lines)" >&2
            tail -n 30 -- "$f" >&2
        done
    fi
    rm -rf -- "$work" "$data"
}
trap cleanup EXIT

port_busy() { ss -Htln "sport = :$1" | grep -q .; }
port_busy "$http_port" && fail "port $http_port already in use"
port_busy "$iperf_port" && fail "port $iperf_port already in use"

echo "== ${qemu[*]} ${bin##*/} --version"
timeout 60 "${qemu[@]}" "$bin" --version || fail "--version"

echo "== daemon on 127.0.0.1:$http_port (data $data)"
"${qemu[@]}" "$bin" daemon --listen "127.0.0.1:$http_port" --data "$data" >"$work/daemon.log" 2>&1 &
daemon_pid=$!
ok=no
for ((i = 0; i < 120; i++)); do   # up to ~60 s: qemu-user is slow to start a big binary
    kill -0 "$daemon_pid" 2>/dev/null || fail "daemon exited early"
    for page in login setup; do
        if curl -fsSL --max-time 5 -o "$work/page.html" "http://127.0.0.1:$http_port/$page" 2>/dev/null \
            && grep -qiE '<html|<!doctype html' "$work/page.html"; then
            ok=yes
            echo "GET /$page: HTML, $(wc -c <"$work/page.html") bytes"
            break 2
        fi
    done
    sleep 0.5
done
[[ $ok == yes ]] || fail "no HTML from http://127.0.0.1:$http_port/login or /setup"

iperf3_server() { # a stock one-off server on the iperf3 port
    iperf3 -s -1 -B 127.0.0.1 -p "$iperf_port" >>"$work/iperf3-server.log" 2>&1 &
    iperf_pid=$!
    for ((i = 0; i < 50; i++)); do
        port_busy "$iperf_port" && break
        kill -0 "$iperf_pid" 2>/dev/null || fail "iperf3 server exited"
        sleep 0.2
    done
    port_busy "$iperf_port" || fail "iperf3 server not listening on $iperf_port"
}

echo "== iperf3 -s -1 -p $iperf_port, ${bin##*/} -c 127.0.0.1 -p $iperf_port -t 2 -J"
iperf3_server
timeout 120 "${qemu[@]}" "$bin" -c 127.0.0.1 -p "$iperf_port" -t 2 -J >"$work/client.json" 2>"$work/client.log" \
    || fail "client run (exit $?)"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
b = d["end"]["sum_received"]["bytes"]
print("end.sum_received.bytes =", b)
sys.exit(0 if isinstance(b, (int, float)) and b > 0 else 1)
' "$work/client.json" || { cp "$work/client.json" "$work/client-json.log"; fail "no bytes received in the client JSON"; }

wait "$iperf_pid" 2>/dev/null || true; iperf_pid=

echo "== iperf3 -s -1 -p $iperf_port, ${bin##*/} -c 127.0.0.1 -p $iperf_port -u -b 10M -t 3 -J (pacing)"
iperf3_server
timeout 120 "${qemu[@]}" "$bin" -c 127.0.0.1 -p "$iperf_port" -u -b 10M -t 3 -J >"$work/udp.json" 2>"$work/udp.log" \
    || fail "paced UDP run (exit $?)"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["end"]["sum_received"]
bps, lost, total = r["bits_per_second"], r.get("lost_packets", 0), r.get("packets", 0)
print("paced UDP -b 10M: received %.2f Mbit/s, %d of %d datagrams lost" % (bps / 1e6, lost, total))
sys.exit(0 if 9.5e6 <= bps <= 10.5e6 and total > 0 and lost * 100 <= total else 1)
' "$work/udp.json" || { cp "$work/udp.json" "$work/udp-json.log"; fail "paced UDP did not hold 10 Mbit/s"; }

stop "$daemon_pid"; daemon_pid=
stop "$iperf_pid"; iperf_pid=
echo "qemu-smoke: OK (${qemu[*]}, ${bin##*/})"
