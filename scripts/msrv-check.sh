#!/usr/bin/env bash
# Prove the minimum supported Rust version (1.85, Cargo.toml rust-version) by a real compile
# with Debian bookworm's rustc 1.85, unpacked (not installed) by fetch-rust-1.85.sh into
# ${MSRV_DIR:-/tmp/rust-1.85}. Cargo is the one on PATH (or $CARGO); only rustc is pinned.
#   usage: msrv-check.sh [--check] [PROJECT_DIR]
#     --check       `cargo check` instead of `cargo build` (faster, no codegen/link)
#     PROJECT_DIR   default: this repository
# Output goes to CARGO_TARGET_DIR (default PROJECT_DIR/target/msrv), kept apart from
# the normal target dir so fingerprints of the two compilers never mix.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=build
project=$here/..
for arg in "$@"; do
    case $arg in
        --check) cmd=check ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        -*) echo "msrv-check: unknown option $arg" >&2; exit 2 ;;
        *) project=$arg ;;
    esac
done
[[ -f $project/Cargo.toml ]] || { echo "msrv-check: no Cargo.toml in $project" >&2; exit 2; }
project=$(cd "$project" && pwd)

start=$SECONDS
rustc185=$("$here/fetch-rust-1.85.sh")
cargo=${CARGO:-cargo}
echo "msrv-check: rustc: $("$rustc185" --version)"
echo "msrv-check: cargo: $("$cargo" --version)"
fetched=$SECONDS

cd "$project"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$project/target/msrv}
# The dev profile is optimised for the tests' sake; proving the compiler version needs no
# optimisation, so build unoptimised (faster) unless told otherwise.
export CARGO_PROFILE_DEV_OPT_LEVEL=${CARGO_PROFILE_DEV_OPT_LEVEL:-0}
# RUSTC overrides rustup's toolchain choice; a RUSTC_WRAPPER (sccache) would still work.
if ! RUSTC=$rustc185 "$cargo" "$cmd" --locked; then
    echo "msrv-check: FAILED: cargo $cmd --locked with $("$rustc185" --version)" >&2
    exit 1
fi
echo "msrv-check: OK: cargo $cmd --locked with rustc 1.85 (fetch $((fetched - start)) s, $cmd $((SECONDS - fetched)) s)"
