#!/usr/bin/env bash
# Offline checks of the packaging (issue 7): Yocto layer, Buildroot tree, systemd unit.
#   1. meta-netperf/.../netperfd-crates.inc matches Cargo.lock   (scripts/gen-crates-inc.py --check)
#   2. the unit/config copies in meta-netperf and buildroot-package equal systemd/
#   3. LICENSE checksums in the recipe (md5) and the Buildroot .hash (sha256) match LICENSE,
#      LICENSE-THIRD-PARTY and LICENSES/; SECURITY.md exists (yocto-check-layer test_security)
#   4. systemd unit: verify + security exposure <= 2.5      (scripts/check-unit.sh)
#   5. oelint-adv on the recipe (pip-installs oelint-adv when missing)
#   6. LICENSE-THIRD-PARTY matches Cargo.lock           (scripts/third-party-licenses.py --check)
#   7. one build setting: Buildroot restates Cargo.toml's [profile.release] (+ strip=false); the
#      recipe overrides only strip=false and restates .cargo/config.toml's LIBSQLITE3_FLAGS
#   8. docs: README.md <= 250 lines and runs the test command .ci/run runs, every relative link
#      in README.md and docs/**/*.md resolves, docs/README.md lists every file under docs/,
#      every docs/*.md the code cites exists (scripts/check-docs.py)
# Runs every check, then exits 1 if any failed. Needs network only to install missing tools.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
recipe_dir=meta-netperf/recipes-connectivity/netperfd
oelint_version=${OELINT_ADV_VERSION:-9.11.2}

passed=0
failed=0
failures=()
run() { # run NAME CMD...
    local name=$1; shift
    echo "=== $name"
    if "$@"; then
        passed=$((passed + 1)); echo "--- ok: $name"
    else
        failed=$((failed + 1)); failures+=("$name"); echo "--- FAILED: $name"
    fi
}

same_file() { # same_file CANONICAL COPY
    if cmp -s -- "$1" "$2"; then echo "$2 == $1"; return 0; fi
    echo "$2 differs from $1 (fix: cp $1 $2)"
    diff -u -- "$1" "$2" | head -n 40 || true
    return 1
}
copies() {
    local rc=0
    same_file systemd/netperfd.service "$recipe_dir/files/netperfd.service" || rc=1
    same_file systemd/netperfd.toml "$recipe_dir/files/netperfd.toml" || rc=1
    same_file systemd/netperfd.service buildroot-package/package/netperfd/netperfd.service || rc=1
    same_file systemd/netperfd-tmpfiles.conf "$recipe_dir/files/netperfd-tmpfiles.conf" || rc=1
    same_file systemd/netperfd-modules.conf "$recipe_dir/files/netperfd-modules.conf" || rc=1
    return "$rc"
}

license_sums() {
    local rc=0 md5 sha
    md5=$(md5sum LICENSE | cut -d' ' -f1)
    sha=$(sha256sum LICENSE | cut -d' ' -f1)
    if grep -Eq "file://LICENSE;md5=$md5( |\")" "$recipe_dir"/netperfd_*.bb; then
        echo "recipe LIC_FILES_CHKSUM md5=$md5"
    else
        echo "recipe LIC_FILES_CHKSUM is not file://LICENSE;md5=$md5"; rc=1
    fi
    if grep -Eq "^sha256[[:space:]]+${sha}[[:space:]]+LICENSE$" buildroot-package/package/netperfd/netperfd.hash; then
        echo "netperfd.hash LICENSE sha256=$sha"
    else
        echo "buildroot-package/package/netperfd/netperfd.hash: LICENSE line is not sha256 $sha"; rc=1
    fi
    local f want
    for f in LICENSE-THIRD-PARTY LICENSES/Unicode-3.0.txt; do
        want=$(sha256sum "$f" | cut -d' ' -f1)
        if grep -Eq "^sha256[[:space:]]+${want}[[:space:]]+${f}$" buildroot-package/package/netperfd/netperfd.hash; then
            echo "netperfd.hash $f sha256=$want"
        else
            echo "buildroot-package/package/netperfd/netperfd.hash: $f line is not sha256 $want"; rc=1
        fi
    done
    # LICENSE-THIRD-PARTY too, so the image's license manifest carries the crate notices
    # (after scripts/third-party-licenses.py rewrites it, update its md5 here).
    for f in LICENSE-THIRD-PARTY LICENSES/Unicode-3.0.txt; do
        want=$(md5sum "$f" | cut -d' ' -f1)
        if grep -q "file://$f;md5=$want" "$recipe_dir"/netperfd_*.bb; then
            echo "recipe LIC_FILES_CHKSUM $f md5=$want"
        else
            echo "recipe LIC_FILES_CHKSUM: $f is not md5=$want"; rc=1
        fi
    done
    # yocto-check-layer's test_security (whinlatter and later): a non-empty SECURITY.md in the
    # layer or at the top of its repository.
    if [[ -s SECURITY.md ]]; then echo "SECURITY.md present"; else echo "SECURITY.md missing or empty"; rc=1; fi
    return "$rc"
}

build_setting() {
    # Buildroot's pkg-cargo.mk exports CARGO_PROFILE_RELEASE_{OPT_LEVEL,LTO,CODEGEN_UNITS}, which
    # beat Cargo.toml: netperfd.mk restates Cargo.toml's values, and STRIP=false (Buildroot
    # strips). The recipe's one override is strip=false (oe-core's already-stripped QA), and
    # it restates .cargo/config.toml's LIBSQLITE3_FLAGS (cargo runs outside the tree there).
    python3 - "$recipe_dir"/netperfd_*.bb buildroot-package/package/netperfd/netperfd.mk <<'EOF'
import re, sys
recipe, mk = open(sys.argv[1]).read(), open(sys.argv[2]).read().replace("\\\n", " ")
toml = open("Cargo.toml").read()
prof = toml[toml.index("[profile.release]"):]
prof = prof[:prof.find("\n[", 1)] if "\n[" in prof[1:] else prof
def cargo(key):
    m = re.search(r"^%s\s*=\s*\"?([^\"\n]+?)\"?\s*$" % re.escape(key), prof, re.M)
    return m.group(1) if m else None
want = {"OPT_LEVEL": cargo("opt-level"), "LTO": cargo("lto"), "CODEGEN_UNITS": cargo("codegen-units"),
        "STRIP": "false"}
env = {}
for m in re.finditer(r"^NETPERFD_CARGO_ENV\s*(\+?=)(.*)$", mk, re.M):
    if m.group(1) == "=":
        env = {}
    env.update(dict(w.split("=", 1) for w in m.group(2).split()))
got = {k[len("CARGO_PROFILE_RELEASE_"):]: v for k, v in env.items() if k.startswith("CARGO_PROFILE_RELEASE_")}
rc = 0
print(f"Cargo.toml [profile.release]: {want}; netperfd.mk NETPERFD_CARGO_ENV: {got}")
if got != want:
    print("netperfd.mk must set exactly CARGO_PROFILE_RELEASE_{OPT_LEVEL,LTO,CODEGEN_UNITS} as in Cargo.toml and STRIP=false")
    rc = 1
code = "\n".join(l for l in recipe.splitlines() if not l.lstrip().startswith("#"))
allowed = 'CARGO_BUILD_FLAGS:append = " --config profile.release.strip=false"'
if allowed not in code:
    print(f"the recipe must keep: {allowed} (oe-core's already-stripped QA)")
    rc = 1
rest = code.replace(allowed, "")
if re.search(r"PROFILE|opt-level|\blto\b|profile\.|codegen", rest):
    print("the recipe overrides the release profile beyond strip=false:",
          [l for l in rest.splitlines() if re.search(r"PROFILE|opt-level|\blto\b|profile\.|codegen", l)])
    rc = 1
flags = re.search(r'LIBSQLITE3_FLAGS\s*=\s*"([^"]*)"', open(".cargo/config.toml").read()).group(1)
m = re.search(r'^export LIBSQLITE3_FLAGS\s*=\s*"([^"]*)"', recipe, re.M)
if not m or m.group(1) != flags:
    print(f'the recipe must export LIBSQLITE3_FLAGS = "{flags}" (.cargo/config.toml), has {m and m.group(1)!r}')
    rc = 1
else:
    print("recipe LIBSQLITE3_FLAGS == .cargo/config.toml's; its one profile override: strip=false")
sys.exit(rc)
EOF
}

docs() {
    # The checker first proves on a made-up tree that it reports each kind of mistake.
    python3 scripts/check-docs.py --self-test && python3 scripts/check-docs.py
}

unit() {
    if ! command -v systemd-analyze >/dev/null; then
        echo "systemd-analyze missing: apt-get install systemd"
        apt-get update -q || echo "apt-get update failed (continuing)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q systemd || return 1
    fi
    scripts/check-unit.sh systemd/netperfd.service
}

oelint() {
    if ! command -v oelint-adv >/dev/null; then
        echo "installing oelint-adv==$oelint_version"
        python3 -m pip install -q --disable-pip-version-check "oelint-adv==$oelint_version" || return 1
    fi
    oelint-adv --version
    # homepageping makes a network request; inconspaces/notneededspace fire on the generated
    # crate list. oelint.spaces.lineend (false positive on the conditional inherit) is
    # suppressed inline in the recipe (# nooelint:).
    local out
    out=$(oelint-adv --quiet --release scarthgap --hide info \
        --suppress oelint.vars.homepageping \
        --suppress oelint.vars.inconspaces \
        --suppress oelint.vars.notneededspace \
        meta-netperf/recipes-*/*/*.bb 2>&1) || { echo "$out"; return 1; }
    # oelint-adv exits 0 on warnings in some versions: treat any finding as a failure.
    if [[ -n $out ]]; then echo "$out"; return 1; fi
    echo "oelint-adv: clean"
}

run "crates.inc up to date" python3 scripts/gen-crates-inc.py --check
run "packaging copies equal systemd/" copies
run "LICENSE checksums" license_sums
run "systemd unit" unit
run "oelint-adv" oelint
run "LICENSE-THIRD-PARTY up to date" python3 scripts/third-party-licenses.py --check
run "one build setting (Cargo.toml = Buildroot = Yocto)" build_setting
run "docs: README front door, relative links, docs index" docs

echo
if ((failed)); then
    echo "check-packaging: failed: ${failures[*]}"
fi
echo "check-packaging: $passed passed, $failed failed"
((failed == 0))
