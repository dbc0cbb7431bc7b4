#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh Debian machine, then runs
# every test — unit tests, interop with stock iperf3/iperf in network namespaces, the web UI
# through HTTP and headless Chromium. Needs root (network namespaces, apt).
#   usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ $(id -u) -ne 0 ]]; then
    # The tests build network namespaces and install packages: as a user, go through sudo,
    # keeping this user's Rust toolchain (sudo's secure_path and HOME would hide rustup's).
    if command -v sudo >/dev/null; then
        echo "test.sh: not root: running again through sudo" >&2
        exec sudo env "PATH=$PATH" "RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}" \
            "CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}" "$0" "$@"
    fi
    echo "test.sh: run as root (the tests build network namespaces and install packages); no sudo here" >&2
    exit 2
fi

# Debian packages the tests use: stock peers, namespace tooling, the browser and its driver.
# dnsmasq-base (the binary without the service: nothing serves DHCP or DNS in the root
# namespace) is the upstream router of the DHCP lab test, busybox its udhcpc.
# qemu-system-x86 and tcpdump: the VM lab of tests/truth_vm.rs (scripts/vm-lab.sh).
need=(iperf3 iperf iproute2 procps chromium chromium-driver time curl nftables iptables axel nginx-light netcat-openbsd python3 python3-pip libxml2-utils prometheus dnsmasq-base busybox qemu-system-x86 tcpdump)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "test.sh: installing ${missing[*]}"
    # A stale index for a foreign architecture makes `apt-get update` exit 100; the install
    # below is what must succeed.
    apt-get update -q || echo "test.sh: apt-get update failed (continuing; checking the install)"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
fi
for t in iperf3 iperf ip chromium chromedriver xmllint dnsmasq busybox qemu-system-x86_64 tcpdump; do
    command -v "$t" >/dev/null || { echo "test.sh: $t is still missing" >&2; exit 1; }
done

# Stock iperf 2 / iperf3 of other versions (Debian's own builds, unpacked, not installed) for
# the version tests in tests/peer_safety.rs; fetched once into a cache.
NETPERFD_STOCK_PEERS=$(scripts/stock-peers.sh "${NETPERFD_STOCK_PEERS:-/var/cache/netperfd-stock-peers}")
export NETPERFD_STOCK_PEERS

# Debian's own kernel for the VM lab (tests/truth_vm.rs: netem, which the host kernel may lack),
# fetched with apt-get download and unpacked into a cache once; a failure here fails that test.
scripts/vm-lab.sh --fetch >/dev/null || echo "test.sh: scripts/vm-lab.sh --fetch failed (tests/truth_vm.rs will fail)" >&2

# junitparser (PyPI) reads back the JUnit reports of `netperfd suite run --junit` (tests/farm.rs).
junitparser_version=${JUNITPARSER_VERSION:-5.0.3}
if ! python3 -c 'import junitparser' 2>/dev/null; then
    echo "test.sh: installing junitparser==$junitparser_version"
    python3 -m pip install -q --disable-pip-version-check "junitparser==$junitparser_version" ||
        python3 -m pip install -q --disable-pip-version-check --break-system-packages "junitparser==$junitparser_version"
fi

# Namespaces left by an interrupted earlier run (names are npt-*) would not clash, but clean them.
for ns in $(ip netns list 2>/dev/null | awk '/^npt-/ {print $1}'); do ip netns del "$ns" || true; done

# --no-fail-fast: one failing test binary must not hide the results of the others.
cargo test --locked --no-fail-fast "$@"
