#!/usr/bin/env bash
# scripts/boot-test.sh — boot netperfd under a real systemd (Debian 12, systemd 252, util-linux
# 2.38.1) in systemd-nspawn, installed the way the Yocto recipe / Buildroot package install it,
# and check what a board image must do, from its first boot on:
#   * first boot without a password: the console's login prompt (agetty of console-getty, read
#     from the container's console) shows the one-time setup code through
#     /etc/issue.d/netperfd.issue -> /run/netperfd/setup.issue, exactly once; the setup URL is
#     renewed when the board's address comes later (as with DHCP); the code from the console
#     sets the password through /setup, and the line leaves the prompt (issue 23 item 2);
#   * netperfd.service is active (running), reached through sd_notify (Type=notify);
#   * port 80 answers, served by user netperfd with exactly CAP_NET_ADMIN, CAP_NET_RAW and
#     CAP_NET_BIND_SERVICE;
#   * the web UI is up within BOOT_MAX_S seconds of boot although one port has no carrier
#     and systemd-networkd-wait-online holds network-online.target back (issue 13 item 2);
#   * board changes through the API: apply -> confirm, and apply -> rollback;
#   * forwarding with NAT through the API, with nftables, iptables-nft and iptables-legacy
#     (update-alternatives), the rules listed by the container's own tools, and stock iperf3
#     traffic through the NAT: the server in peer 2 sees the board's address as the source;
#   * `systemctl restart` and `kill -9` recover (new main PID, port 80 answers again), and so
#     does a crash loop (6 kill -9 in a row, more than systemd's default start limit);
#   * a confirmed address removed by something else (as `networkctl reconfigure` does) is
#     named on the Ports page and in GET /api/board;
#   * a reboot keeps the state: the password, the confirmed address (re-applied), the run
#     history; an unconfirmed change is gone; no setup code on the console;
#   * an image with admin_password_hash (netperfd hash-password) and no state logs in with it
#     and shows no setup code;
#   * `systemd-analyze security netperfd` exposure <= 2.5.
# Each phase prints its time.
#
# Topology (all namespaces created here, removed on exit, failure or Ctrl-C; traffic stays in
# them; addresses are documentation ranges):
#   nbt-p1-PID  eth0 192.0.2.2/24 (default via .1) --- lan0 192.0.2.1/24    nbt-board-PID
#               (lan0 gets its address only after the web UI is up, as from a late DHCP lease)
#   nbt-p2-PID  eth0 198.51.100.2/24 (no route back) --- wan0 (198.51.100.1/24 set via API)
#               nc0p (down)                          --- nc0 (no carrier, managed by networkd)
# The container boots with --network-namespace-path=/run/netns/nbt-board-PID.
#
# The Debian root (debootstrap --variant=minbase, package list PKGS below) is cached in
# BOOTTEST_CACHE (default /var/cache/netperfd-boottest/<hash of suite, mirror, packages>), and
# copied for each run, so every run boots a clean root.
#
# Usage: sudo scripts/boot-test.sh [NETPERFD_BINARY]
#   Without a binary: cargo build --release --locked (CARGO_TARGET_DIR, default target/).
#   BOOTTEST_MIRROR  Debian mirror (default http://deb.debian.org/debian, as apt uses here)
#   BOOTTEST_CACHE   cache directory (default /var/cache/netperfd-boottest)
#   BOOT_MAX_S       seconds from boot start to a web UI answer (default 10)
#   BOOTTEST_UNIT    unit file to install (default systemd/netperfd.service; for negative checks)
# Needs root, network access to the mirror on a cold cache, and the Debian packages
# debootstrap, systemd-container, iperf3, curl, iproute2 (installed when missing).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
mirror=${BOOTTEST_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
cache=${BOOTTEST_CACHE:-/var/cache/netperfd-boottest}
boot_max=${BOOT_MAX_S:-10}
# systemd + the firewall tools the daemon runs; procps for ps in checks; dbus for
# systemd-analyze; kmod so modules-load.d is read as on a board. No iproute2: the daemon
# never runs `ip` (the recipe no longer depends on it); the checks use the host's. agetty
# (util-linux) and script (bsdutils) are in every Debian root.
pkgs=systemd,systemd-sysv,dbus,iptables,nftables,procps,kmod
password=boot-test-password

t0=$SECONDS
phase_t=$SECONDS phase_name=
log() { echo "boot-test [$((SECONDS - t0)) s]: $*"; }
phase() { # phase NAME: print the time of the phase that ends here
    [[ -n $phase_name ]] && log "phase took $((SECONDS - phase_t)) s: $phase_name"
    phase_name=$1 phase_t=$SECONDS
}
fail() { echo "boot-test: FAILED: $*" >&2; exit 1; }
passed=()
ok() { passed+=("$1"); log "ok: $1"; }

[[ $(id -u) == 0 ]] || fail "needs root (namespaces, debootstrap, systemd-nspawn)"

missing=()
for p in debootstrap systemd-container iperf3 curl iproute2; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    apt-get update -q || log "apt-get update failed (continuing; checking the install instead)"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi

# ---------------------------------------------------------------- the binary
bin=${1:-}
if [[ -z $bin ]]; then
    log "cargo build --release --locked"
    (cd "$repo" && nice -n 10 cargo build --release --locked --bin netperfd)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/netperfd
fi
[[ -x $bin ]] || fail "no executable netperfd at $bin"

# ---------------------------------------------------------------- cached Debian root
key=$(printf '%s\n' "$suite" "$mirror" minbase "$pkgs" | sha256sum | cut -c1-16)
base=$cache/$suite-$key
mkdir -p "$cache"
# One debootstrap at a time: several checkouts on one machine share the cache.
exec {cache_lock}>"$cache/.lock"
flock "$cache_lock"
if [[ ! -e $base/.complete ]]; then
    log "cold cache: debootstrap $suite from $mirror into $base"
    rm -rf "$base" "$base.tmp"
    mkdir -p "$cache"
    debootstrap --variant=minbase --include="$pkgs" "$suite" "$base.tmp" "$mirror" \
        >"$cache/debootstrap-$key.log" 2>&1 || { tail -20 "$cache/debootstrap-$key.log"; fail "debootstrap"; }
    rm -rf "$base.tmp/var/cache/apt/archives"/*.deb
    mv "$base.tmp" "$base"
    touch "$base/.complete"
    # roots of older package lists are never used again
    find "$cache" -maxdepth 1 -name "$suite-*" ! -name "$suite-$key" -exec rm -rf {} +
else
    log "warm cache: $base"
fi
flock -u "$cache_lock"

# ---------------------------------------------------------------- cleanup
id=$$
ns_board=nbt-board-$id ns_p1=nbt-p1-$id ns_p2=nbt-p2-$id
work=$(mktemp -d /var/tmp/netperfd-boottest.XXXXXX)
root=$work/root
nspawn_pid=
leader=
cleanup() {
    local rc=$?
    set +e
    if ((rc != 0)) && [[ -n $leader ]]; then
        echo "boot-test: journal of netperfd.service (last 40 lines):" >&2
        nsenter -t "$leader" -m -u -i -n -p -r -w -- journalctl -u netperfd.service -n 40 --no-pager >&2
    fi
    if [[ -n $nspawn_pid ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
        [[ -n $leader ]] && kill -RTMIN+4 "$leader" 2>/dev/null # systemd: poweroff
        for _ in $(seq 1 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$nspawn_pid" 2>/dev/null
        wait "$nspawn_pid" 2>/dev/null
    fi
    for n in "$ns_board" "$ns_p1" "$ns_p2"; do
        if ip netns pids "$n" >/dev/null 2>&1; then
            ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
            ip netns del "$n" 2>/dev/null
        fi
    done
    rm -rf "$work"
    if ((rc == 0)); then log "PASSED (${#passed[@]} checks) in $((SECONDS - t0)) s"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "copy root to $root"
cp -a "$base" "$root"

# ---------------------------------------------------------------- install like the recipe
# user and group (recipe: USERADD_PARAM; Buildroot: NETPERFD_USERS)
chroot "$root" useradd --system --no-create-home --home-dir /var/lib/netperfd \
    --shell /sbin/nologin --user-group --groups systemd-journal netperfd
install -m 0755 "$bin" "$root/usr/bin/netperfd"
install -D -m 0644 "${BOOTTEST_UNIT:-$repo/systemd/netperfd.service}" "$root/usr/lib/systemd/system/netperfd.service"
install -D -m 0644 "$repo/systemd/netperfd-tmpfiles.conf" "$root/usr/lib/tmpfiles.d/netperfd.conf"
install -D -m 0644 "$repo/systemd/netperfd-modules.conf" "$root/usr/lib/modules-load.d/netperfd.conf"
install -d -m 0755 "$root/etc/netperfd"
# Factory state: no admin_password_hash (the first boot shows the setup code on the console;
# the provisioning route, `netperfd hash-password` into admin_password_hash, is checked last).
hash=$(printf '%s\n' "$password" | "$bin" hash-password | tail -1)
[[ $hash == '$argon2'* ]] || fail "netperfd hash-password printed '$hash'"
install -m 0640 "$repo/systemd/netperfd.toml" "$root/etc/netperfd/netperfd.toml"
grep -q '^setup_issue_file = "/run/netperfd/setup.issue"' "$root/etc/netperfd/netperfd.toml" ||
    fail "the shipped netperfd.toml does not set setup_issue_file"
chroot "$root" chown root:netperfd /etc/netperfd/netperfd.toml
# recipe / Buildroot package: the login prompt's link to the daemon's file
install -d -m 0755 "$root/etc/issue.d"
ln -sf /run/netperfd/setup.issue "$root/etc/issue.d/netperfd.issue"
[[ -s $root/etc/issue ]] || fail "the Debian root has no /etc/issue (agetty would read /run/issue.d instead)"
chroot "$root" systemctl enable netperfd.service >/dev/null 2>&1 || fail "systemctl enable"
# A typical image: networkd manages a port without a cable, and something pulls
# network-online.target in (then systemd-networkd-wait-online waits 120 s for it).
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=nc0\n\n[Network]\nAddress=203.0.113.1/24\n' >"$root/etc/systemd/network/50-nc0.network"
chroot "$root" systemctl enable systemd-networkd.service systemd-networkd-wait-online.service >/dev/null 2>&1 ||
    fail "enable networkd"
ln -sf /usr/lib/systemd/system/network-online.target "$root/etc/systemd/system/multi-user.target.wants/network-online.target"
echo "netperfd-boottest" >"$root/etc/hostname"
: >"$root/etc/machine-id"

# ---------------------------------------------------------------- namespaces
ip netns add "$ns_board"
ip netns add "$ns_p1"
ip netns add "$ns_p2"
ip -n "$ns_board" link add lan0 type veth peer name eth0 netns "$ns_p1"
ip -n "$ns_board" link add wan0 type veth peer name eth0 netns "$ns_p2"
ip -n "$ns_board" link add nc0 type veth peer name nc0p netns "$ns_p1"
for n in "$ns_board" "$ns_p1" "$ns_p2"; do ip -n "$n" link set lo up; done
ip -n "$ns_board" link set lan0 up # its address comes after boot (a late DHCP lease)
ip -n "$ns_board" link set wan0 up
ip -n "$ns_board" link set nc0 up # peer nc0p stays down: NO-CARRIER
ip -n "$ns_p1" addr add 192.0.2.2/24 dev eth0
ip -n "$ns_p1" link set eth0 up
ip -n "$ns_p1" route add default via 192.0.2.1
ip -n "$ns_p2" addr add 198.51.100.2/24 dev eth0
ip -n "$ns_p2" link set eth0 up

bx() { ip netns exec "$ns_board" "$@"; }
# HTTPS (issue 41): the shipped config serves 0.0.0.0:443 with the certificate the daemon made
# at first start in its data directory (its names include 127.0.0.1); port 80 only redirects.
cert=$root/var/lib/netperfd/tls-cert.pem
tls=(--cacert "$cert")
http() { # http METHOD PATH [JSON]: sets $code (HTTP status) and $body
    local m=$1 p=$2 d=${3:-}
    local args=(-sS -o "$work/body" -w '%{http_code}' -X "$m" -b "$work/cookies" -c "$work/cookies")
    [[ -n ${csrf:-} ]] && args+=(-H "X-CSRF-Token: $csrf")
    [[ -n $d ]] && args+=(-H 'Content-Type: application/json' --data "$d")
    code=$(bx curl "${args[@]}" "${tls[@]}" "https://127.0.0.1$p") || code=000
    body=$(cat "$work/body" 2>/dev/null || true)
}
c() { nsenter -t "$leader" -m -u -i -n -p -r -w -- "$@"; } # run inside the container
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
wait_for() { # wait_for SECONDS WHAT CMD... (polls every 0.2 s)
    local max=$1 what=$2; shift 2
    local end=$((SECONDS + max))
    while ! "$@" >/dev/null 2>&1; do
        ((SECONDS < end)) || fail "$what: not within $max s"
        sleep 0.2
    done
}
web_up() { [[ -s $cert && $(bx curl -s -o /dev/null -w '%{http_code}' --max-time 1 "${tls[@]}" https://127.0.0.1/api/health) == 200 ]]; }
main_pid() { c systemctl show -P MainPID netperfd.service; }
active_running() { [[ $(c systemctl show -P ActiveState netperfd.service) == active &&
    $(c systemctl show -P SubState netperfd.service) == running ]]; }

# ---------------------------------------------------------------- boot
console=$work/console-1.txt
boot() { # boot N: start the container (boot number N), wait for the web UI, find its systemd
    console=$work/console-$1.txt
    boot_start=$(date +%s.%N)
    systemd-nspawn -q -D "$root" -b --register=no --keep-unit --capability=CAP_NET_ADMIN \
        --network-namespace-path="/run/netns/$ns_board" --machine="nbt$id" \
        >"$console" 2>&1 </dev/null &
    nspawn_pid=$!
    wait_for 30 "web UI answers HTTPS on port 443" web_up
    boot_s=$(awk -v a="$boot_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    leader=
    for p in $(pgrep -P "$nspawn_pid"); do [[ $(cat "/proc/$p/comm") == systemd ]] && leader=$p; done
    [[ -n $leader ]] || fail "cannot find the container's systemd (children of $nspawn_pid: $(pgrep -P "$nspawn_pid"))"
}
console_has() { grep -aqE "$1" "$console"; } # the container's console (agetty's screen)
show_issue() { # what agetty shows above login: now, inside the container (util-linux 2.38.1)
    c script -qec 'agetty --show-issue' /dev/null </dev/null 2>&1 | tr -d '\r'
}

phase "first boot"
log "boot: systemd-nspawn -b in $ns_board"
boot 1
le "$boot_s" "$boot_max" || fail "web UI up after $boot_s s (> $boot_max s)"
online=$(c systemctl is-active network-online.target || true)
ok "web UI up ${boot_s} s after boot start with nc0 without carrier (network-online.target: $online)"

# ---------------------------------------------------------------- first boot: setup code
code_re='setup code ([0-9A-F]{5}-[0-9A-F]{5})'
wait_for 15 "the setup code on the console's login prompt (console-getty)" console_has "$code_re"
code=$(grep -aoE "$code_re" "$console" | head -1 | awk '{print $3}')
line=$(grep -aE "$code_re" "$console" | head -1 | tr -d '\r')
if grep -q '192.0.2.1' <<<"$line"; then fail "the console names 192.0.2.1 before lan0 has it: $line"; fi
log "console before lan0 has an address: ${line#*netperfd: }"
issue=$(show_issue)
n=$(grep -c "setup code $code" <<<"$issue" || true)
[[ $n == 1 ]] || fail "agetty --show-issue shows the setup code $n times (want 1): $issue"
ok "console login prompt shows the setup code $code once (agetty 2.38 with /etc/issue, via /etc/issue.d/netperfd.issue)"
# The certificate's SHA-256 (computed here from the PEM file) is on the console with the code.
fp=$(python3 -c 'import base64,hashlib,re,sys; t=open(sys.argv[1]).read(); b=re.search(r"-----BEGIN CERTIFICATE-----(.*?)-----END", t, re.S).group(1); print(":".join("%02X" % x for x in hashlib.sha256(base64.b64decode(b)).digest()))' "$cert")
n=$(grep -c "certificate SHA-256 $fp" <<<"$issue" || true)
[[ $n == 1 ]] || fail "agetty --show-issue shows the certificate SHA-256 $fp $n times (want 1): $issue"
ok "console login prompt shows the certificate SHA-256 ${fp:0:11}… with the code (that of $cert)"
st=$(bx curl -sS -o /dev/null -w '%{http_code} %{redirect_url}' http://127.0.0.1/setup)
[[ $st == "307 https://127.0.0.1/setup" ]] || fail "port 80 answered /setup with '$st', want a redirect to https://"
st=$(bx curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1/api/health)
[[ $st == 400 ]] || fail "port 80 answered /api/health with $st, want 400 naming the https:// URL"
ok "port 80 sends pages to https:// and refuses the API"

addr_t=$(date +%s.%N)
ip -n "$ns_board" addr add 192.0.2.1/24 dev lan0 # the DHCP lease arrives
renewed() { console_has "Open https://192\.0\.2\.1/setup.*setup code $code"; }
wait_for 10 "the console's setup line renewed with 192.0.2.1 after the address came" renewed
ok "console line renewed with https://192.0.2.1/setup $(awk -v a="$addr_t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s after the address came (agetty reprinted the prompt)"

typed=$(tr 'A-F' 'a-f' <<<"${code/-/ }")
before_setup=$(stat -c %s "$console")
st=$(bx curl -sS -o /dev/null -w '%{http_code}' -c "$work/cookies" --data-urlencode "code=$typed" \
    --data-urlencode "password=$password" --data-urlencode "confirm=$password" "${tls[@]}" https://127.0.0.1/setup)
[[ $st == 303 ]] || fail "/setup with the code from the console ('$typed') answered $st"
gone() { ! c test -e /run/netperfd/setup.issue; }
wait_for 5 "setup.issue removed after the setup" gone
issue=$(show_issue)
if grep -q 'setup code' <<<"$issue"; then fail "agetty still shows a setup code: $issue"; fi
# The running agetty reprints its prompt (the daemon touched /run/agetty.reload): a new
# "login:" after the setup, and no setup code on the screen since then.
reprinted() {
    local since
    since=$(tail -c +"$((before_setup + 1))" "$console")
    grep -aq 'login:' <<<"$since" && ! grep -aq 'setup code' <<<"$since"
}
wait_for 5 "the console's prompt reprinted without the spent setup code" reprinted
ok "the code read from the console set the password through /setup; the running agetty reprinted its prompt without it"

wait_for 10 "active (running)" active_running
[[ $(c systemctl show -P Type netperfd.service) == notify ]] || fail "Type is not notify"
status=$(c systemctl status --no-pager netperfd.service 2>&1 || true)
grep -q 'Active: active (running)' <<<"$status" || fail "systemctl status: $status"
ok "netperfd.service active (running), Type=notify (READY=1 via sd_notify)"

pid=$(main_pid)
user=$(c ps -o user= -p "$pid" | tr -d ' ')
[[ $user == netperfd ]] || fail "main PID $pid runs as '$user'"
capeff=$(awk '/^CapEff/ {print $2}' "/proc/$(bx ss -ltnpH 'sport = :443' | sed -nE 's/.*pid=([0-9]+).*/\1/p' | head -1)/status")
[[ $capeff == 0000000000003400 ]] || fail "listener on port 443 has CapEff $capeff, want 0x3400 (NET_BIND_SERVICE, NET_ADMIN, NET_RAW)"
ok "port 443 served by user netperfd with CapEff=$capeff (CAP_NET_BIND_SERVICE CAP_NET_ADMIN CAP_NET_RAW)"
kmode=$(stat -c '%a %U' "$root/var/lib/netperfd/tls-key.pem" 2>/dev/null || true)
[[ $kmode == "600 "* ]] || fail "tls-key.pem is '$kmode', want mode 600"
ok "the certificate's key is mode 600 (owner ${kmode#* })"

sec=$(c systemd-analyze security --no-pager netperfd.service 2>&1 | sed -nE 's/.*Overall exposure level for netperfd.service: ([0-9.]+).*/\1/p')
[[ -n $sec ]] || fail "systemd-analyze security printed no exposure level"
le "$sec" 2.5 || fail "systemd-analyze security exposure $sec > 2.5"
ok "systemd-analyze security netperfd: exposure $sec (<= 2.5)"

# ---------------------------------------------------------------- API session
phase "service, API, apply/confirm/rollback"
login() {
    rm -f "$work/cookies"
    code=$(bx curl -sS -o /dev/null -w '%{http_code}' -c "$work/cookies" --data-urlencode "password=$password" "${tls[@]}" https://127.0.0.1/login)
    [[ $code == 303 ]] || fail "login answered $code"
    csrf=
    http GET /ports
    csrf=$(sed -nE 's/.*name="csrf" value="([0-9a-fA-F]+)".*/\1/p' <<<"$body" | head -1)
    [[ -n $csrf ]] || fail "no CSRF token on /ports ($code)"
}
code=$(bx curl -sS -o /dev/null -w '%{http_code}' -c "$work/cookies" --data-urlencode "password=$password" "${tls[@]}" https://127.0.0.1/login)
[[ $code == 303 ]] || fail "login answered $code"
csrf=
http GET /ports
csrf=$(sed -nE 's/.*name="csrf" value="([0-9a-fA-F]+)".*/\1/p' <<<"$body" | head -1)
[[ -n $csrf ]] || fail "no CSRF token on /ports ($code)"
ok "logged in with the password set through /setup"

http GET '/api/diag/journal.txt?lines=20'
[[ $code == 200 ]] || fail "Diagnostics journal answered $code: $body"
grep -q 'netperfd' <<<"$body" || fail "Diagnostics journal has no netperfd line: $body"
ok "Diagnostics → journal reads the unit's journal (user netperfd in group systemd-journal)"

has_addr() { grep -q " $2/" <<<"$(bx ip -4 -o addr show dev "$1")"; }
http POST /api/ports/wan0/addresses '{"address":"198.51.100.1/24","confirm_within":120}'
[[ $code == 200 ]] || fail "address change answered $code: $body"
has_addr wan0 198.51.100.1 || fail "198.51.100.1/24 not on wan0: $body"
http POST /api/board/confirm
[[ $code == 200 ]] || fail "confirm answered $code: $body"
ok "apply -> confirm through the API (198.51.100.1/24 on wan0, confirmed)"
http POST /api/ports/wan0/addresses '{"address":"198.51.100.77/24","confirm_within":120}'
[[ $code == 200 ]] && has_addr wan0 198.51.100.77 || fail "second change answered $code: $body"
http POST /api/board/rollback
[[ $code == 200 ]] || fail "rollback answered $code: $body"
! has_addr wan0 198.51.100.77 && has_addr wan0 198.51.100.1 || fail "rollback left $(bx ip -4 -o addr show dev wan0)"
ok "apply -> rollback through the API (198.51.100.77 gone, the confirmed 198.51.100.1 kept)"

# ---------------------------------------------------------------- forwarding with NAT, 3 backends
nat_traffic() { # iperf3 from peer 1 to peer 2 through the board; source must be the board's
    local srv=$work/iperf3-server.json
    ip netns exec "$ns_p2" iperf3 -s -1 -J -p 5301 >"$srv" 2>&1 &
    local spid=$!
    for _ in $(seq 1 50); do [[ -n $(ip netns exec "$ns_p2" ss -ltnH 'sport = :5301') ]] && break; sleep 0.1; done
    ip netns exec "$ns_p1" timeout 20 iperf3 -c 198.51.100.2 -p 5301 -t 2 -J >"$work/iperf3-client.json" ||
        { kill "$spid" 2>/dev/null; fail "$1: iperf3 through the NAT failed: $(head -c 300 "$work/iperf3-client.json")"; }
    wait "$spid" || true
    python3 - "$srv" "$work/iperf3-client.json" "$1" <<'EOF'
import json, sys
srv, cli, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
src = srv["start"]["connected"][0]["remote_host"]
bps = cli["end"]["sum_received"]["bits_per_second"]
if src != "198.51.100.1":
    sys.exit(f"{name}: server saw source {src}, want the board's 198.51.100.1 (no NAT?)")
if bps <= 0:
    sys.exit(f"{name}: no traffic")
print(f"{name}: iperf3 through the NAT at {bps / 1e6:.0f} Mbit/s, source seen as {src}")
EOF
}
backend() { # backend NAME FIREWALL_SETTING ALTERNATIVE RULES_CMD (run inside the container)...
    local name=$1 setting=$2 alt=$3; shift 3
    if [[ -n $alt ]]; then
        c update-alternatives --quiet --set iptables "/usr/sbin/iptables-$alt"
        c update-alternatives --quiet --set ip6tables "/usr/sbin/ip6tables-$alt"
    fi
    http PUT /api/board/settings "{\"firewall\":\"$setting\"}"
    [[ $code == 200 ]] || fail "$name: settings answered $code: $body"
    http POST /api/forwarding '{"in":"lan0","out":"wan0","nat":true,"unchecked":true}'
    [[ $code == 200 ]] || fail "$name: forwarding with NAT answered $code: $body"
    local rules # (no `cmd | grep -q` under pipefail: grep's early exit gives cmd SIGPIPE)
    rules=$(c "$@" 2>&1) || fail "$name: '$*' (in the container) failed: $rules"
    grep -qi masquerade <<<"$rules" || fail "$name: no MASQUERADE rule in '$*'"
    [[ $(bx cat /proc/sys/net/ipv4/ip_forward) == 1 ]] || fail "$name: ip_forward is not 1"
    local line
    line=$(nat_traffic "$name") || fail "$line"
    ok "$line"
    http DELETE '/api/forwarding?in=lan0&out=wan0&unchecked=true'
    [[ $code == 200 ]] || fail "$name: disabling forwarding answered $code: $body"
    rules=$(c "$@" 2>&1) || fail "$name: '$*' (in the container) failed: $rules"
    if grep -qi masquerade <<<"$rules"; then fail "$name: MASQUERADE rule left after disable"; fi
    ok "$name: forwarding with NAT enabled and disabled through the API"
}
phase "forwarding with NAT, 3 backends"
backend nftables nftables "" nft list ruleset
backend iptables-nft iptables nft iptables-nft-save
backend iptables-legacy iptables legacy iptables-legacy-save
[[ -e $root/run/netperfd/xtables.lock || -n $(c ls /run/netperfd/xtables.lock 2>/dev/null) ]] ||
    fail "iptables-legacy did not use /run/netperfd/xtables.lock"
ok "iptables-legacy took its lock in /run/netperfd/xtables.lock (XTABLES_LOCKFILE)"

# ---------------------------------------------------------------- recovery
phase "restart, kill -9, crash loop"
old=$(main_pid)
c systemctl restart netperfd.service
wait_for 15 "active after systemctl restart" active_running
wait_for 15 "web UI after systemctl restart" web_up
new=$(main_pid)
[[ $new != "$old" && $new != 0 ]] || fail "systemctl restart: main PID still $old"
ok "systemctl restart: back in service (PID $old -> $new)"

old=$new
kill_start=$SECONDS
c kill -9 "$old"
new_pid() { local p; p=$(main_pid); [[ $p != "$old" && $p != 0 ]]; }
wait_for 20 "new main PID after kill -9" new_pid
wait_for 15 "active after kill -9" active_running
wait_for 15 "web UI after kill -9" web_up
ok "kill -9: restarted by systemd and serving again after $((SECONDS - kill_start)) s (PID $old -> $(main_pid))"

loop_start=$SECONDS
for i in 1 2 3 4 5 6; do # more starts than systemd's default limit (5 in 10 s)
    old=$(main_pid)
    c kill -9 "$old"
    wait_for 20 "new main PID after kill -9 number $i of the crash loop" new_pid
done
wait_for 15 "active after the crash loop" active_running
wait_for 15 "web UI after the crash loop" web_up
nres=$(c systemctl show -P NRestarts netperfd.service)
ok "crash loop: 6 kill -9 in $((SECONDS - loop_start)) s, serving again (NRestarts=$nres, no start limit hit)"

# ---------------------------------------------------------------- reboot keeps the state
phase "reboot"
login
# a run in the history: stock iperf3 against the board's iperf3 server
ip netns exec "$ns_p1" timeout 20 iperf3 -c 192.0.2.1 -t 1 >/dev/null || fail "stock iperf3 against the board's server failed"
sleep 1
runs_before=$(bx curl -sS -b "$work/cookies" "${tls[@]}" https://127.0.0.1/api/runs | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d if isinstance(d, list) else d.get("runs", [])))' 2>/dev/null || echo "?")
# Something else drops a confirmed address (as `networkctl reconfigure` does): the Ports page
# and GET /api/board name it.
bx ip addr del 198.51.100.1/24 dev wan0
http GET /api/board
python3 -c 'import json,sys; m=json.load(sys.stdin).get("missing"); sys.exit(0 if m == ["198.51.100.1/24 on wan0"] else f"missing: {m}")' <<<"$body" ||
    fail "GET /api/board does not name the dropped 198.51.100.1/24 ($code)"
http GET /ports
grep -q 'id="missing-addresses"' <<<"$body" || fail "the Ports page does not say that 198.51.100.1/24 is gone"
ok "a confirmed address removed behind netperfd's back is named on the Ports page and in /api/board"
http POST /api/ports/wan0/addresses '{"address":"198.51.100.88/24","confirm_within":300}'
[[ $code == 200 ]] || fail "unconfirmed change answered $code: $body"
# A real reboot: the kernel forgets every address (the namespace outlives the container here).
bx ip addr flush dev wan0
bx ip addr flush dev lan0
log "systemctl reboot"
c systemctl reboot || true
for _ in $(seq 1 300); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$nspawn_pid" 2>/dev/null && fail "the container did not go down for the reboot within 30 s"
wait "$nspawn_pid" || true
nspawn_pid= leader=
ip -n "$ns_board" addr add 192.0.2.1/24 dev lan0 # DHCP again (the checks reach the board on it)
boot 2
ok "rebooted: web UI up ${boot_s} s after boot start"
login
ok "the password set on the first boot still logs in"
wait_for 10 "the confirmed 198.51.100.1/24 re-applied on wan0" has_addr wan0 198.51.100.1
has_addr wan0 198.51.100.88 && fail "the unconfirmed 198.51.100.88 came back after the reboot"
ok "confirmed address re-applied at start, the unconfirmed change is gone"
runs_after=$(bx curl -sS -b "$work/cookies" "${tls[@]}" https://127.0.0.1/api/runs | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d if isinstance(d, list) else d.get("runs", [])))' 2>/dev/null || echo "?")
[[ $runs_before =~ ^[1-9][0-9]*$ ]] || fail "no run in the history before the reboot ($runs_before)"
[[ $runs_after == "$runs_before" ]] || fail "run history: $runs_before runs before the reboot, $runs_after after"
sleep 2
console_has 'setup code' && fail "the console shows a setup code after the reboot although a password is set"
issue=$(show_issue)
grep -q 'setup code' <<<"$issue" && fail "agetty shows a setup code after the reboot: $issue"
ok "no setup code on the console; run history kept ($runs_after runs)"

# ---------------------------------------------------------------- provisioned password
phase "factory reset with a provisioned password"
c systemctl stop netperfd.service
c find /var/lib/netperfd -mindepth 1 -delete
sed -i "s|^# *admin_password_hash = .*|admin_password_hash = \"$hash\"|" "$root/etc/netperfd/netperfd.toml"
grep -q '^admin_password_hash = "\$argon2' "$root/etc/netperfd/netperfd.toml" || fail "hash not set in the toml"
c systemctl start netperfd.service
wait_for 15 "web UI after the start with admin_password_hash" web_up
login
c test -e /run/netperfd/setup.issue && fail "a setup code was written although admin_password_hash is set"
ok "empty state + admin_password_hash from netperfd hash-password: logs in, no setup code (image builders' route)"

phase ""
log "checks passed: ${#passed[@]}"
