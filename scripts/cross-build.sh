#!/usr/bin/env bash
# Cross-build size-optimised release binaries for the boards on Debian 12 x86_64
# (see shared docs cross-build.md):
#   aarch64-unknown-linux-gnu      i.MX8M Plus, i.MX8QM, LS1046A, LS1028A
#   armv7-unknown-linux-gnueabihf  i.MX6Q, Cyclone V
# Toolchains come from Debian packages, installed here when missing (needs root):
#   aarch64: rustc-web + libstd-rust-web-dev:arm64 (same version) + gcc-aarch64-linux-gnu
#   armv7:   Debian's Rust 1.85 unpacked by fetch-rust-1.85.sh --armhf (the armhf std of
#            bookworm-security is not reliably served) + gcc-arm-linux-gnueabihf
#
#   usage: cross-build.sh [--target aarch64|armv7|all] [--rustc system|1.85] [--project DIR]
#                         [--unstripped]
#     --target      default all
#     --rustc       compiler: system = /usr/bin/rustc from rustc-web (default for aarch64),
#                   1.85 = unpacked Rust 1.85 (default and only choice for armv7)
#     --project     cargo project to build (default: this repository)
#     --unstripped  build as Yocto and Buildroot do (--config profile.release.strip=false;
#                   they strip themselves) and write stripped copies to <triple>/stripped/
#                   (CI: scripts/yocto-qa.py and check-build-envs.py check the unstripped one)
# Output: ${CARGO_TARGET_DIR:-target}/<triple>/release/, relative to the project.
# Run it under `nice -n 19` on a shared machine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
target=all
rustc_choice=
project=$here/..
unstripped=no

usage() { sed -n '12,22p' "$0" >&2; exit 2; }
while (($#)); do
    case $1 in
        --target) [[ $# -ge 2 ]] || usage; target=$2; shift 2 ;;
        --target=*) target=${1#*=}; shift ;;
        --rustc) [[ $# -ge 2 ]] || usage; rustc_choice=$2; shift 2 ;;
        --rustc=*) rustc_choice=${1#*=}; shift ;;
        --project) [[ $# -ge 2 ]] || usage; project=$2; shift 2 ;;
        --project=*) project=${1#*=}; shift ;;
        --unstripped) unstripped=yes; shift ;;
        -h|--help) usage ;;
        *) echo "cross-build: unknown argument: $1" >&2; usage ;;
    esac
done
case $target in
    aarch64) targets=(aarch64) ;;
    armv7) targets=(armv7) ;;
    all) targets=(aarch64 armv7) ;;
    *) echo "cross-build: --target must be aarch64, armv7 or all" >&2; exit 2 ;;
esac
case $rustc_choice in
    ''|system|1.85) ;;
    *) echo "cross-build: --rustc must be system or 1.85" >&2; exit 2 ;;
esac
[[ -f $project/Cargo.toml ]] || { echo "cross-build: no Cargo.toml in $project" >&2; exit 2; }
project=$(cd "$project" && pwd)

log() { echo "cross-build: $*" >&2; }

is_installed() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) == installed ]]; }

apt_updated=no
# apt-get waits up to 10 min for another apt or dpkg holding the lock (DPkg::Lock::Timeout)
# instead of giving up at once, as it did when the machine was busy installing.
apt_install() { # apt_install PKG...: install the missing ones; a failing `apt-get update` is tolerated
    local missing=() p
    for p in "$@"; do is_installed "$p" || missing+=("$p"); done
    ((${#missing[@]})) || return 0
    if [[ $apt_updated == no ]]; then
        apt-get update -q || log "apt-get update failed (continuing; checking the install instead)"
        apt_updated=yes
    fi
    log "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" || true
    for p in "${missing[@]}"; do
        is_installed "$p" || { log "could not install $p"; exit 1; }
    done
}

add_arch() {
    if ! dpkg --print-foreign-architectures | grep -qx "$1"; then
        log "dpkg --add-architecture $1"
        dpkg --add-architecture "$1"
        apt_updated=no
    fi
}

# The repository's [profile.release] (Cargo.toml) is the board profile, the same one Yocto
# and Buildroot use: no overrides here (docs/build-settings.md).
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}

built=()
for t in "${targets[@]}"; do
    case $t in
        aarch64) triple=aarch64-unknown-linux-gnu; gnu=aarch64-linux-gnu; arch=arm64; choice=${rustc_choice:-system} ;;
        armv7) triple=armv7-unknown-linux-gnueabihf; gnu=arm-linux-gnueabihf; arch=armhf; choice=${rustc_choice:-1.85} ;;
    esac
    if [[ $t == armv7 && $choice == system ]]; then
        log "armv7 uses the unpacked Rust 1.85 (libstd-rust-web-dev:armhf of rustc-web is not reliably served)"
        choice=1.85
    fi

    # libc6-dev-<arch>-cross is only a Recommends of gcc-<triple> (crt files, libc.so).
    apt_install "gcc-$gnu" "libc6-dev-$arch-cross" binutils
    if [[ $choice == system ]]; then
        add_arch "$arch"
        apt_install rustc-web cargo-web "libstd-rust-web-dev:$arch"
        host_v=$(dpkg-query -W -f='${Version}' rustc-web)
        std_v=$(dpkg-query -W -f='${Version}' "libstd-rust-web-dev:$arch")
        [[ $host_v == "$std_v" ]] || { log "rustc-web $host_v but libstd-rust-web-dev:$arch $std_v"; exit 1; }
        rustc=/usr/bin/rustc
    else
        rustc=$("$here/fetch-rust-1.85.sh" "--$arch")
    fi
    # Debian's cargo (cargo-web) when present: rustup's proxy on PATH may try to download.
    if [[ -n ${CARGO:-} ]]; then cargo=$CARGO
    elif [[ -x /usr/bin/cargo ]]; then cargo=/usr/bin/cargo
    else cargo=cargo; fi

    up=${triple^^}; up=${up//-/_}
    log "$triple: $("$rustc" --version), $("$cargo" --version)"
    start=$SECONDS
    (
        cd "$project"
        export RUSTC=$rustc
        export "CARGO_TARGET_${up}_LINKER=$gnu-gcc"
        export "CC_${triple//-/_}=$gnu-gcc"
        export "AR_${triple//-/_}=$gnu-ar"
        extra=()
        [[ $unstripped == yes ]] && extra=(--config profile.release.strip=false)
        "$cargo" build --release --locked --target "$triple" "${extra[@]}"
    )
    log "$triple: built in $((SECONDS - start)) s"
    built+=("$triple")
done

echo "== release binaries"
cd "$project"
for triple in "${built[@]}"; do
    dir=$CARGO_TARGET_DIR/$triple/release
    found=no
    while IFS= read -r -d '' bin; do
        found=yes
        if [[ $unstripped == yes ]]; then
            case $triple in aarch64*) gnu=aarch64-linux-gnu ;; armv7*) gnu=arm-linux-gnueabihf ;; esac
            printf '%-32s %-28s %9d bytes (unstripped, as Yocto/Buildroot get it)\n' "$triple" "${bin##*/}" "$(stat -c %s "$bin")"
            mkdir -p "$CARGO_TARGET_DIR/$triple/stripped"
            "$gnu-strip" -o "$CARGO_TARGET_DIR/$triple/stripped/${bin##*/}" "$bin"
            bin=$CARGO_TARGET_DIR/$triple/stripped/${bin##*/}
        fi
        size=$(stat -c %s "$bin")
        if readelf -S "$bin" | grep -q '\.symtab'; then state="NOT stripped"; else state=stripped; fi
        printf '%-32s %-28s %9d bytes (%s KiB, %s)\n' "$triple" "${bin##*/}" "$size" "$((size / 1024))" "$state"
    done < <(find "$dir" -maxdepth 1 -type f -perm -u+x -print0 | sort -z)
    [[ $found == yes ]] || { log "no executable in $dir"; exit 1; }
done
