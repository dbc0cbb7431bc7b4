#!/usr/bin/env bash
# Stock peers of other versions for the interop tests: Debian's own builds of iperf 2.0.14a and
# iperf3 3.9 (bullseye), iperf 2.2.1 and iperf3 3.18 (trixie) and the newest iperf3 Debian has
# (forky: 3.22 in December 2026, not pinned so that the archive moving on cannot break the
# fetch; tests print its version), unpacked into a cache directory
# beside the host's own iperf 2.1.8 / iperf3 3.12 (bookworm). Nothing is installed: every
# binary runs through a wrapper with the dynamic loader and libraries of its own release, so a
# trixie build runs on a bookworm host.
#
#   usage: scripts/stock-peers.sh [DIR]     (default /var/cache/netperfd-stock-peers)
#   prints DIR; afterwards DIR/bin/ holds iperf-2.0.14a, iperf-2.2.1, iperf3-3.9, iperf3-3.18,
#   iperf3-newest.
#
# Tests find them with NETPERFD_STOCK_PEERS=DIR (scripts/test.sh sets it); a test whose peer is
# missing fails with the command to run. Needs network access to Debian's archive only once.
set -euo pipefail
dir=${1:-/var/cache/netperfd-stock-peers}
mkdir -p "$dir"/bin "$dir"/apt/lists/partial "$dir"/apt/cache/archives/partial

# name  suite     packages (the tool first, then the libraries its loader needs)
peers=(
    "iperf-2.0.14a bullseye iperf=2.0.14a+dfsg1-1 libc6 libgcc-s1 libstdc++6"
    "iperf-2.2.1   trixie   iperf=2.2.1+dfsg-1 libc6 libgcc-s1 libstdc++6"
    "iperf3-3.9    bullseye iperf3=3.9-1+deb11u1 libiperf0=3.9-1+deb11u1 libc6 libsctp1 libssl1.1"
    "iperf3-3.18   trixie   iperf3=3.18-2+deb13u2 libiperf0=3.18-2+deb13u2 libc6 libsctp1 libssl3t64 libzstd1"
    "iperf3-newest forky    iperf3 libiperf0 libc6 libsctp1 libssl3t64 libzstd1 zlib1g"
)

missing=0
for p in "${peers[@]}"; do
    read -r name _ <<<"$p"
    [[ -x $dir/bin/$name ]] || missing=1
done
if ((missing == 0)); then
    echo "$dir"
    exit 0
fi

cat >"$dir/apt/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye trixie forky
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
apt_opts=(-o "Dir::Etc::sourcelist=$dir/apt/debian.sources" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache" -o APT::Sandbox::User=root)
apt-get -q "${apt_opts[@]}" update >&2

for p in "${peers[@]}"; do
    read -r name suite pkgs <<<"$p"
    root=$dir/root-$name
    debs=$dir/debs/$name
    rm -rf "$root" "$debs"
    mkdir -p "$root" "$debs"
    for pkg in $pkgs; do
        # A bare name means the suite's own version: pin it with "/suite".
        [[ $pkg == *=* ]] || pkg="$pkg/$suite"
        (cd "$debs" && apt-get -q "${apt_opts[@]}" download "$pkg" >&2)
    done
    for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$root"; done
    tool=${name%%-*}
    # lib64/ holds an absolute link to the host's path; take the release's own file.
    loader=$(find "$root/lib/x86_64-linux-gnu" "$root/usr/lib/x86_64-linux-gnu" -name 'ld-linux-x86-64.so.2' 2>/dev/null | head -n 1 || true)
    libs="$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu"
    cat >"$dir/bin/$name" <<EOF
#!/bin/sh
# $name from Debian $suite, run with its own loader and libraries (scripts/stock-peers.sh).
exec "$loader" --library-path "$libs" "$root/usr/bin/$tool" "\$@"
EOF
    chmod +x "$dir/bin/$name"
    "$dir/bin/$name" -v >&2 2>&1 || true
done
echo "$dir"
