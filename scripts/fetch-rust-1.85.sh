#!/usr/bin/env bash
# Fetch Debian bookworm's Rust 1.85 (rustc-web 1.85.0+dfsg3-1~deb12u3) without installing it:
# `apt-get download` the .debs and unpack them with `dpkg-deb -x` into ${MSRV_DIR:-/tmp/rust-1.85},
# then write ${MSRV_DIR}/bin/rustc, a wrapper that runs that rustc with --sysroot and
# LD_LIBRARY_PATH. Used by msrv-check.sh (host std) and cross-build.sh (--armhf: armv7 std).
# Idempotent: skips what is already unpacked. A foreign std (--armhf/--arm64) is looked up in
# a private apt state under ${MSRV_DIR}/apt (its own package lists, apt told of the architecture
# by APT::Architectures): the host's dpkg never gets the architecture added, so a stale foreign
# index can never make the host's later `apt-get update` exit 100.
#   usage: fetch-rust-1.85.sh [--armhf] [--arm64]   prints the wrapper's path on stdout
#     --armhf / --arm64   also unpack the armv7 / aarch64 std (libstd-rust-web-dev:<arch>)
set -euo pipefail

ver=${RUST_185_DEB_VERSION:-1.85.0+dfsg3-1~deb12u3}
dir=${MSRV_DIR:-/tmp/rust-1.85}
foreign=()
for arg in "$@"; do
    case $arg in
        --armhf) foreign+=(armhf) ;;
        --arm64) foreign+=(arm64) ;;
        *) echo "usage: $0 [--armhf] [--arm64]" >&2; exit 2 ;;
    esac
done

log() { echo "fetch-rust-1.85: $*" >&2; }

root=$dir/root
debs=$dir/debs
mkdir -p "$root" "$debs" "$dir/bin"

# apt options of the set being fetched: empty for the host's own packages, a private state
# (lists and caches under $dir/apt) for a foreign architecture's (set by use_private_apt).
apt_opts=()
use_private_apt() { # use_private_apt ARCH
    mkdir -p "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial"
    apt_opts=(-o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache"
        -o "APT::Architectures::=$host_arch" -o "APT::Architectures::=$1")
}

# apt-get download as root: let it write into $debs without the _apt sandbox warning.
apt_download() { (cd "$debs" && apt-get -q "${apt_opts[@]}" -o APT::Sandbox::User=root download "$@" >&2); }

ensure_known() { # ensure_known PKG=VER...: refresh the lists once if apt does not know them
    local p
    for p in "$@"; do
        if ! apt-cache "${apt_opts[@]}" show "$p" >/dev/null 2>&1; then
            log "apt does not know $p yet: apt-get update"
            apt-get "${apt_opts[@]}" update -q >&2 || log "apt-get update failed (continuing; checking packages instead)"
            break
        fi
    done
    for p in "$@"; do
        apt-cache "${apt_opts[@]}" show "$p" >/dev/null 2>&1 || { log "package $p not available from apt"; exit 1; }
    done
}

unpack_set() { # unpack_set STAMP PKG=VER...
    local stamp=$dir/.unpacked-$1; shift
    if [[ -f $stamp ]]; then return 0; fi
    ensure_known "$@"
    rm -f "$debs"/*.deb
    apt_download "$@"
    local deb
    for deb in "$debs"/*.deb; do
        log "unpacking ${deb##*/}"
        dpkg-deb -x "$deb" "$root"
    done
    rm -f "$debs"/*.deb
    touch "$stamp"
}

host_arch=$(dpkg --print-architecture)
llvm=any
if [[ ! -f $dir/.unpacked-host-$ver ]]; then
    # libllvm19: any bookworm build of LLVM 19 will do; take apt's candidate.
    llvm_candidate() { apt-cache policy libllvm19 2>/dev/null | sed -n 's/^ *Candidate: //p'; }
    llvm=$(llvm_candidate)
    if [[ -z $llvm || $llvm == "(none)" ]]; then
        apt-get update -q >&2 || log "apt-get update failed (continuing)"
        llvm=$(llvm_candidate)
    fi
    [[ -n $llvm && $llvm != "(none)" ]] || { log "libllvm19 not available from apt"; exit 1; }
fi
unpack_set "host-$ver" "rustc-web=$ver" "libstd-rust-web-1.85=$ver" "libstd-rust-web-dev=$ver" "libllvm19=$llvm"

for arch in "${foreign[@]}"; do
    case $arch in
        armhf) rust_triple=armv7-unknown-linux-gnueabihf ;;
        arm64) rust_triple=aarch64-unknown-linux-gnu ;;
    esac
    # The armhf index of bookworm-security is sometimes served stale (update exits 100):
    # ensure_known tolerates it, and it stays in the private state.
    use_private_apt "$arch"
    unpack_set "$arch-$ver" "libstd-rust-web-1.85:$arch=$ver" "libstd-rust-web-dev:$arch=$ver"
    [[ -d $root/usr/lib/rustlib/$rust_triple/lib ]] \
        || { log "$rust_triple std missing in $root/usr/lib/rustlib"; exit 1; }
    apt_opts=()
done

triple=$(gcc -print-multiarch 2>/dev/null || echo "$host_arch-linux-gnu")
wrapper=$dir/bin/rustc
{
    echo '#!/usr/bin/env bash'
    echo "# rustc $ver from Debian, unpacked by scripts/fetch-rust-1.85.sh"
    printf 'root=%q\n' "$root"
    printf 'libs=%q\n' "$root/usr/lib/$triple:$root/usr/lib/llvm-19/lib"
    # shellcheck disable=SC2016 # written literally into the wrapper
    echo 'export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"'
    # shellcheck disable=SC2016
    echo 'exec "$root/usr/bin/rustc" --sysroot "$root/usr" "$@"'
} >"$wrapper.tmp"
chmod +x "$wrapper.tmp"
mv "$wrapper.tmp" "$wrapper"
"$wrapper" --version >/dev/null || { log "unpacked rustc does not run"; exit 1; }
echo "$wrapper"
