#!/usr/bin/env python3
"""One release binary everywhere (issue 23 item 3): build with Yocto's and Buildroot's cargo
environment and require the binary of the plain release build.

CI builds the release binary once, with the one override both build systems make
(`cargo build --release --locked --target TRIPLE --config profile.release.strip=false`: Yocto
and Buildroot strip the binary themselves). This script then runs `cargo build` again in the
same target directory the way each build system runs it:

* Yocto (oe-core cargo.bbclass / cargo_common.bbclass, scarthgap .. master): the working
  directory is ${B}, outside the source tree (so the tree's .cargo/config.toml is NOT read),
  `cargo build -v --frozen --target TRIPLE --release --manifest-path=<src>/Cargo.toml` plus the
  recipe's CARGO_BUILD_FLAGS:append; the variables oe_cargo_fix_env exports that are not the
  toolchain (RUST_BACKTRACE, the anti-vendoring ones of master: LIBSQLITE3_SYS_USE_PKG_CONFIG=1
  ...), then the recipe's own `export NAME = "..."` lines and its oe_cargo_fix_env:append.
* Buildroot (package/pkg-cargo.mk, 2025.02 .. 2026.08): `cd $(@D) && cargo build --offline
  --release --manifest-path Cargo.toml --locked` with PKG_CARGO_ENV (CARGO_BUILD_TARGET, the
  CARGO_PROFILE_{DEV,RELEASE}_* of a default configuration: BR2_OPTIMIZE_2, no BR2_ENABLE_LTO,
  no debug) followed by the package's NETPERFD_CARGO_ENV (read from netperfd.mk), which wins.

Not reproduced, by design: the toolchain each build system brings (CC/CFLAGS, linker,
RUSTFLAGS with --remap-path-prefix, Buildroot's host-tool RUSTFLAGS and -Z
target-applies-to-host) and their vendored CARGO_HOME; the caller's toolchain environment
(RUSTC, CC_<triple>, the linker variable of a cross build) is kept.

When an environment selects anything else (profile values, SQLite options, features), cargo
recompiles: the script stops it at the first "Compiling" line (so a failure costs seconds, not
a build), prints cargo's reason ("Dirty ...") and fails. The unit cargo had started is then
half-built, and the next build in that target directory compiles it again (cargo notices). When cargo finds everything fresh, the
binary is the reference file itself: its SHA-256, size (and stripped size) and the SQLite
compile options it reports (`netperfd build-info`, under --run for a cross binary) are
compared with the reference's and printed, with the time of each step.

usage: check-build-envs.py --reference BIN [--target TRIPLE] [--cargo CARGO] [--strip STRIP]
                           [--run "qemu-aarch64-static"] [--only yocto|buildroot]
Exit 0 when every environment gives the reference binary, 1 otherwise, 2 on bad input.
"""
import argparse
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE_DIR = os.path.join(ROOT, "meta-netperf", "recipes-connectivity", "netperfd")
BR_MK = os.path.join(ROOT, "buildroot-package", "package", "netperfd", "netperfd.mk")

# oe_cargo_fix_env (cargo_common.bbclass, master 2026-08): every export that is not the
# toolchain (CC, CXX, CFLAGS, AR, TARGET_*, HOST_*), and cargo_common's RUST_BACKTRACE.
YOCTO_ENV = {
    "RUST_BACKTRACE": "1",
    "LIBGIT2_NO_VENDOR": "1",
    "LIBSSH2_SYS_USE_PKG_CONFIG": "1",
    "LIBSQLITE3_SYS_USE_PKG_CONFIG": "1",
    "OPENSSL_NO_VENDOR": "1",
    "PKG_CONFIG_ALLOW_CROSS": "1",
    "PKG_CONFIG_ALL_DYNAMIC": "1",
    "SYSTEM_DEPS_BUILD_INTERNAL": "never",
    "ZSTD_SYS_USE_PKG_CONFIG": "1",
}

# pkg-cargo.mk's PKG_CARGO_ENV for a default configuration, without the toolchain variables.
def buildroot_env(triple: str) -> dict:
    env = {"CARGO_BUILD_TARGET": triple}
    for prof in ("DEV", "RELEASE"):
        env.update({
            f"CARGO_PROFILE_{prof}_INCREMENTAL": "false",
            f"CARGO_PROFILE_{prof}_CODEGEN_UNITS": "16",
            f"CARGO_PROFILE_{prof}_SPLIT_DEBUGINFO": "off",
            f"CARGO_PROFILE_{prof}_OPT_LEVEL": "2",  # BR2_OPTIMIZE_2, Buildroot's default
            f"CARGO_PROFILE_{prof}_LTO": "false",  # BR2_ENABLE_LTO is not set
            f"CARGO_PROFILE_{prof}_DEBUG": "0",  # BR2_ENABLE_DEBUG is not set
            f"CARGO_PROFILE_{prof}_DEBUG_ASSERTIONS": "false",
            f"CARGO_PROFILE_{prof}_OVERFLOW_CHECKS": "false",
        })
    return env


def die(msg: str) -> "None":
    print(f"check-build-envs: {msg}", file=sys.stderr)
    sys.exit(2)


def recipe() -> str:
    names = [f for f in os.listdir(RECIPE_DIR) if re.fullmatch(r"netperfd_.*\.bb", f)]
    if len(names) != 1:
        die(f"want one netperfd_*.bb in {RECIPE_DIR}, found {names}")
    with open(os.path.join(RECIPE_DIR, names[0])) as f:
        return f.read()


def yocto_from_recipe(text: str):
    """The recipe's CARGO_BUILD_FLAGS:append words, its exported variables and what its
    oe_cargo_fix_env:append sets or unsets."""
    flags = []
    for m in re.finditer(r'^CARGO_BUILD_FLAGS:append\s*=\s*"([^"]*)"', text, re.M):
        flags += shlex.split(m.group(1))
    exports = {m.group(1): m.group(2) for m in re.finditer(r'^export\s+(\w+)\s*=\s*"([^"]*)"', text, re.M)}
    unset = []
    m = re.search(r"^oe_cargo_fix_env:append\s*\(\)\s*\{(.*?)^\}", text, re.M | re.S)
    if m:
        for line in m.group(1).splitlines():
            w = shlex.split(line, comments=True)
            if len(w) == 2 and w[0] == "unset":
                unset.append(w[1])
            elif len(w) == 2 and w[0] == "export" and "=" in w[1]:
                k, v = w[1].split("=", 1)
                exports[k] = v
            elif w:
                die(f"oe_cargo_fix_env:append: cannot reproduce {line.strip()!r}")
    return flags, exports, unset


def buildroot_from_mk(text: str) -> dict:
    """NETPERFD_CARGO_ENV of netperfd.mk as NAME -> value (`=` and `+=` lines, continued)."""
    text = text.replace("\\\n", " ")
    env = {}
    for m in re.finditer(r"^NETPERFD_CARGO_ENV\s*(\+?=)\s*(.*)$", text, re.M):
        if m.group(1) == "=":
            env = {}
        for w in shlex.split(m.group(2)):
            if "=" not in w or "$" in w:
                die(f"NETPERFD_CARGO_ENV: cannot reproduce {w!r}")
            k, v = w.split("=", 1)
            env[k] = v
    if re.search(r"^NETPERFD_CARGO_BUILD_OPTS\s*\+?=", text, re.M | re.S) and \
            not re.search(r"ifneq \(\$\(NETPERFD_OVERRIDE_SRCDIR\),\)\s*\nNETPERFD_CARGO_VENDOR_OPTS", text):
        die("NETPERFD_CARGO_BUILD_OPTS outside the local-checkout block: teach this script")
    return env


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stripped_size(path: str, strip: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "stripped")
        subprocess.run([strip, "-o", out, path], check=True)
        return os.path.getsize(out)


def sqlite_options(path: str, run: list) -> list:
    """`netperfd build-info`'s SQLite lines: "sqlite version: 3.x.y", "sqlite option: NAME"."""
    out = subprocess.run(run + [path, "build-info"], check=True, capture_output=True, text=True).stdout
    return [l.strip() for l in out.splitlines() if l.startswith("sqlite ")]


def describe(path: str, strip: str, run: list) -> dict:
    return {
        "sha256": sha256(path),
        "size": os.path.getsize(path),
        "stripped": stripped_size(path, strip),
        "sqlite": sqlite_options(path, run),
    }


def clean_env() -> dict:
    """The caller's environment without anything that selects cargo settings."""
    keep = {}
    for k, v in os.environ.items():
        if k.startswith(("CARGO_PROFILE_", "CARGO_BUILD_", "LIBSQLITE3_", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS")):
            continue
        keep[k] = v
    return keep


def run_cargo(name: str, argv: list, env: dict, cwd: str) -> bool:
    """Run cargo; stop at the first unit it would compile. True when everything was fresh."""
    print(f"--- {name}: cd {cwd} && " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())
                                                  if k not in os.environ or os.environ[k] != v)
          + " " + shlex.join(argv))
    p = subprocess.Popen(argv, cwd=cwd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         text=True, start_new_session=True)
    dirty, compiling = [], None
    assert p.stderr is not None
    for line in p.stderr:
        s = line.strip()
        if s.startswith("Dirty "):
            dirty.append(s)
        if s.startswith("Compiling "):
            compiling = s
            os.killpg(p.pid, signal.SIGTERM)
            break
        if s.startswith("error") or s.startswith("warning: "):
            print(f"    {s}")
    p.wait()
    if compiling:
        print(f"FAIL {name}: cargo recompiles ({compiling}): this environment builds a different binary")
        for d in dirty[:10]:
            print(f"    {d}")
        if not dirty:
            print("    (no 'Dirty' reason: a profile value or the target differs, so every unit gets "
                  "another hash; compare the variables above with Cargo.toml's [profile.release])")
        return False
    if p.returncode != 0:
        print(f"FAIL {name}: cargo exited {p.returncode}")
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", required=True, help="the CI release build (strip=false)")
    ap.add_argument("--target", default="x86_64-unknown-linux-gnu")
    ap.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    ap.add_argument("--strip", default="strip", help="strip of the target's binutils")
    ap.add_argument("--run", default="", help="prefix to run a target binary, e.g. qemu-aarch64-static")
    ap.add_argument("--only", choices=["yocto", "buildroot"])
    a = ap.parse_args()
    t_all = time.monotonic()
    ref = os.path.abspath(a.reference)
    target_dir = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    target_dir = os.path.abspath(os.path.join(ROOT, target_dir))
    out = os.path.join(target_dir, a.target, "release", "netperfd")
    if os.path.realpath(ref) != os.path.realpath(out):
        die(f"--reference must be {out} (the same target directory and --target), not {ref}")
    if not os.path.isfile(ref):
        die(f"no reference binary {ref}: cargo build --release --locked --target {a.target} "
            "--config profile.release.strip=false")
    run = shlex.split(a.run)

    t = time.monotonic()
    want = describe(ref, a.strip, run)
    print(f"reference {ref}: {want['size']:,} bytes, {want['stripped']:,} stripped, sha256 {want['sha256'][:16]}…, "
          f"{len(want['sqlite'])} SQLite lines ({time.monotonic() - t:.1f} s)")
    for l in want["sqlite"]:
        print(f"    {l}")
    opts = {l.split(":", 1)[1].strip() for l in want["sqlite"] if l.startswith("sqlite option:")}
    if not opts:
        die(f"{ref} build-info lists no SQLite compile options")
    # The options .cargo/config.toml asks for must be in force in the reference itself.
    with open(os.path.join(ROOT, ".cargo", "config.toml")) as f:
        m = re.search(r'LIBSQLITE3_FLAGS\s*=\s*"([^"]*)"', f.read())
    if not m:
        die(".cargo/config.toml has no LIBSQLITE3_FLAGS")
    bad = []
    for flag in m.group(1).split():
        name = flag[2:].removeprefix("SQLITE_")
        if flag.startswith("-U") and any(o == name or o.startswith(name + "=") for o in opts):
            bad.append(f"{name} is compiled in although LIBSQLITE3_FLAGS has {flag}")
        if flag.startswith("-D") and not any(o == name or o.startswith(name + "=") for o in opts):
            bad.append(f"{name} is not compiled in although LIBSQLITE3_FLAGS has {flag}")
    if bad:
        print("FAIL reference: " + "; ".join(bad))
        return 1

    rflags, rexports, runset = yocto_from_recipe(recipe())
    with open(BR_MK) as f:
        br_pkg_env = buildroot_from_mk(f.read())
    cargo = shutil.which(a.cargo) or a.cargo
    results = []
    with tempfile.TemporaryDirectory(prefix="netperfd-B-") as b_dir:
        systems = []
        if a.only in (None, "yocto"):
            env = clean_env()
            env.update(YOCTO_ENV)
            env.update(rexports)
            for k in runset:
                env.pop(k, None)
            env["CARGO_TARGET_DIR"] = target_dir  # oe-core: [build] target-dir = "${B}/target"
            argv = [cargo, "build", "-v", "--frozen", "--target", a.target, "--release",
                    f"--manifest-path={os.path.join(ROOT, 'Cargo.toml')}"] + rflags
            systems.append(("yocto", argv, env, b_dir))
        if a.only in (None, "buildroot"):
            env = clean_env()
            env.update(buildroot_env(a.target))
            env.update(br_pkg_env)
            env["CARGO_TARGET_DIR"] = target_dir
            # -v only prints why cargo would recompile ("Dirty ..."); it changes nothing built.
            argv = [cargo, "build", "-v", "--offline", "--release", "--manifest-path", "Cargo.toml", "--locked"]
            systems.append(("buildroot", argv, env, ROOT))
        for name, argv, env, cwd in systems:
            t = time.monotonic()
            ok = run_cargo(name, argv, env, cwd)
            if ok:
                got = describe(out, a.strip, run)
                diffs = [k for k in ("sha256", "size", "stripped", "sqlite") if got[k] != want[k]]
                if diffs:
                    ok = False
                    print(f"FAIL {name}: differs from the reference in {', '.join(diffs)}: "
                          f"{got['size']:,} bytes ({got['stripped']:,} stripped), SQLite {got['sqlite']}")
                else:
                    print(f"ok {name}: nothing recompiled; the same binary ({got['size']:,} bytes, "
                          f"{got['stripped']:,} stripped, same SQLite options)")
            print(f"    {name}: {time.monotonic() - t:.1f} s")
            results.append(ok)
    print(f"check-build-envs ({a.target}): {sum(results)} of {len(results)} environments give the reference "
          f"binary ({time.monotonic() - t_all:.1f} s)")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
