#!/usr/bin/env python3
"""Yocto's packaging QA on a netperfd binary, offline (issue 23 item 1).

oe-core's do_package stops with an ERROR on a binary that rustc already stripped
(`already-stripped` is in ERROR_QA on scarthgap, whinlatter, wrynose and master), so the recipe
builds with `--config profile.release.strip=false` and oe-core strips it itself (and makes the
-dbg package). CI cannot fetch oe-core, so this script re-implements, with the standard library
only, the checks oe-core runs on an ELF file that the recipe installs into ${bindir}:

* already-stripped -- mirrors oe.package.is_elf() (meta/lib/oe/package.py), which runs
  `file -b` and sets bit 1 for "ELF", bit 2 unless the output says "not stripped", bit 4 for
  "executable", bit 8 for "shared"; and oe.package.process_split_and_strip_files(), which
  raises the `already-stripped` QA error for an executable file whose is_elf() has bits 1 and 2
  ("File '/usr/bin/netperfd' from netperfd was already stripped, this will prevent future
  debugging!"). `file` calls an ELF file "not stripped" when it has a SHT_SYMTAB section;
  this script reads the section headers itself and, when `file` is installed, also runs
  `file -b` the way is_elf() does and requires both to agree.
* ldflags -- mirrors insane.bbclass package_qa_hash_style(): a dynamic ELF with a symbol table
  (DT_SYMTAB) must have DT_GNU_HASH (oe-core's LDFLAGS carry --hash-style=gnu).
* textrel -- mirrors insane.bbclass package_qa_textrel(): no DT_TEXTREL.
* rpaths -- mirrors insane.bbclass package_qa_check_rpath(): no DT_RPATH/DT_RUNPATH (oe-core
  flags ones into the build tree; netperfd needs none at all).
* arch -- mirrors insane.bbclass package_qa_check_arch(): ELF machine, class and byte order
  are the target's (--arch).

Not mirrored: `buildpaths` (needs bitbake's TMPDIR; rust-common.bbclass remaps ${WORKDIR} in
RUSTFLAGS) and the package-level checks (file-rdeps, license...), which need bitbake.

usage: yocto-qa.py [--arch x86_64|aarch64|armv7] [--expect-stripped] BINARY
  --expect-stripped  self-test: BINARY is stripped, and the script must report already-stripped
                     (exit 0 then, 1 if it did not)
Exit 0 when every check passes, 1 when oe-core would stop, 2 on bad input.
"""
import argparse
import os
import shutil
import stat
import struct
import subprocess
import sys

# e_machine, ELF class (1 = 32-bit, 2 = 64-bit), byte order (1 = little) per target.
ARCHES = {
    "x86_64": (62, 2, 1),
    "aarch64": (183, 2, 1),
    "armv7": (40, 1, 1),
}
SHT_SYMTAB = 2
SHT_DYNAMIC = 6
DT = {"NULL": 0, "RPATH": 15, "SYMTAB": 6, "TEXTREL": 22, "RUNPATH": 29, "GNU_HASH": 0x6FFFFEF5,
      "FLAGS_1": 0x6FFFFFFB}
DF_1_PIE = 0x08000000


class Elf:
    """Headers of one ELF file: class, byte order, type, machine, section types, dynamic tags."""

    def __init__(self, data: bytes):
        if len(data) < 52 or data[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        self.cls, self.order = data[4], data[5]
        if self.cls not in (1, 2) or self.order not in (1, 2):
            raise ValueError("unknown ELF class or byte order")
        e = "<" if self.order == 1 else ">"
        if self.cls == 2:
            (self.type, self.machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = struct.unpack_from(
                e + "HHIQQQIHHHHHH", data, 16)
            sh_fmt, dyn_fmt = e + "IIQQQQIIQQ", e + "qQ"
        else:
            (self.type, self.machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _) = struct.unpack_from(
                e + "HHIIIIIHHHHHH", data, 16)
            sh_fmt, dyn_fmt = e + "IIIIIIIIII", e + "iI"
        self.section_types = []
        self.dynamic = []
        for i in range(shnum):
            off = shoff + i * shentsize
            if off + struct.calcsize(sh_fmt) > len(data):
                raise ValueError("section header table past the end of the file")
            f = struct.unpack_from(sh_fmt, data, off)
            sh_type, sh_offset, sh_size = f[1], f[4], f[5]
            self.section_types.append(sh_type)
            if sh_type == SHT_DYNAMIC:
                step = struct.calcsize(dyn_fmt)
                for o in range(sh_offset, min(sh_offset + sh_size, len(data)) - step + 1, step):
                    tag, val = struct.unpack_from(dyn_fmt, data, o)
                    if tag == DT["NULL"]:
                        break
                    self.dynamic.append((tag, val))

    def has_symtab(self) -> bool:
        return SHT_SYMTAB in self.section_types

    def has_dyn(self, name: str) -> bool:
        return any(tag == DT[name] for tag, _ in self.dynamic)

    def dyn(self, name: str) -> int:
        return next((v for tag, v in self.dynamic if tag == DT[name]), 0)


def is_elf_like_oe(elf: Elf) -> int:
    """oe.package.is_elf()'s bit mask, computed from the headers (1 ELF, 2 stripped,
    4 executable, 8 shared)."""
    t = 1
    if not elf.has_symtab():
        t |= 2
    # `file` says "executable" for ET_EXEC, "pie executable" for ET_DYN with DF_1_PIE and
    # "shared object" for other ET_DYN files.
    if elf.type == 2 or (elf.type == 3 and elf.dyn("FLAGS_1") & DF_1_PIE):
        t |= 4
    elif elf.type == 3:
        t |= 8
    return t


def is_elf_with_file(path: str):
    """oe.package.is_elf() itself: `file -b` and the same tests on its words (None without
    `file`)."""
    if not shutil.which("file"):
        return None, ""
    out = subprocess.check_output(["file", "-b", path], stderr=subprocess.STDOUT).decode("utf-8")
    t = 0
    if "ELF" in out:
        t |= 1
        if "not stripped" not in out:
            t |= 2
        if "executable" in out:
            t |= 4
        if "shared" in out:
            t |= 8
    return t, out.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="x86_64", choices=sorted(ARCHES))
    ap.add_argument("--expect-stripped", action="store_true")
    ap.add_argument("binary")
    a = ap.parse_args()
    path = a.binary
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            elf = Elf(f.read())
    except (OSError, ValueError) as e:
        print(f"yocto-qa: {path}: {e}", file=sys.stderr)
        return 2
    if not st.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
        print(f"yocto-qa: {path} is not executable (cargo_do_install installs executables only)")
        return 2

    name = "/usr/bin/" + os.path.basename(path)
    errors = []
    # already-stripped (package.py process_split_and_strip_files via is_elf)
    mask = is_elf_like_oe(elf)
    fmask, fout = is_elf_with_file(path)
    if fmask is not None:
        print(f"file -b: {fout}")
        print(f"oe.package.is_elf(): {fmask} (headers: {mask})")
        if (fmask & 3) != (mask & 3):
            print("yocto-qa: `file` and the section headers disagree on ELF/stripped")
            return 2
        mask = fmask
    else:
        print(f"oe.package.is_elf() from the headers: {mask} (`file` not installed)")
    if mask & 1 and mask & 2:
        errors.append(("already-stripped",
                       f"File '{name}' from netperfd was already stripped, this will prevent future debugging!"))
    # ldflags (package_qa_hash_style)
    if elf.has_dyn("SYMTAB") and not elf.has_dyn("GNU_HASH"):
        errors.append(("ldflags", f"File {name} in package netperfd doesn't have GNU_HASH (didn't pass LDFLAGS?)"))
    # textrel (package_qa_textrel)
    if elf.has_dyn("TEXTREL"):
        errors.append(("textrel", f"netperfd: ELF binary {name} has relocations in .text"))
    # rpaths (package_qa_check_rpath)
    for tag in ("RPATH", "RUNPATH"):
        if elf.has_dyn(tag):
            errors.append(("rpaths", f"netperfd: {name} has a {tag}"))
    # arch (package_qa_check_arch)
    want = ARCHES[a.arch]
    got = (elf.machine, elf.cls, elf.order)
    if got != want:
        errors.append(("arch", f"Architecture did not match ({got} wanted {want}) in {name}"))

    kind = "executable" if mask & 4 else "shared object" if mask & 8 else f"type {elf.type}"
    print(f"{path}: ELF {kind}, machine {elf.machine}, "
          f"{'symbol table' if elf.has_symtab() else 'no symbol table'}, {len(elf.dynamic)} dynamic tags")
    for check, msg in errors:
        print(f"ERROR: netperfd-1.0-r0 do_package: QA Issue: {msg} [{check}]")
    names = [c for c, _ in errors]
    if a.expect_stripped:
        if names == ["already-stripped"]:
            print("yocto-qa: self-test ok: a stripped binary is refused with already-stripped, as oe-core does")
            return 0
        print(f"yocto-qa: self-test FAILED: wanted exactly [already-stripped], got {names}")
        return 1
    if errors:
        print(f"yocto-qa: oe-core would stop at do_package: {', '.join(names)}")
        return 1
    print("yocto-qa: ok (already-stripped, ldflags, textrel, rpaths, arch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
