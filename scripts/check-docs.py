#!/usr/bin/env python3
"""Docs checks (CI, from scripts/check-packaging.sh; issue 40 item 6):

  1. README.md is a front door: at most 250 lines (the feature manual lives in docs/guide/).
  2. Every relative link in README.md, docs/**/*.md and the other Markdown files (packaging
     and bench READMEs) — [text](target), [text]: target,
     <a href="target"> — points at a file or folder that exists; a #fragment after a .md file
     must name one of its headings (GitHub's anchors). Links in code spans and fenced blocks
     are not links; http(s)://, mailto: are not checked.
  3. docs/README.md, the index, links every file under docs/ (each with its line).
  4. The README's test command is the one .ci/run runs ("tests (README test command)").
  5. Every docs/….md path that code, scripts, tests, templates or benches name (comments citing
     a note, e.g. "see docs/iperf3-wire.md §8.2") is a file that exists.

Exit 1 with one line per problem. usage: scripts/check-docs.py [--self-test]
(--self-test: run the checks on a small made-up tree with one of each mistake and fail unless
each is reported, and not the correct links beside them.)
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MAX_README_LINES = 250

LINK = re.compile(r"(?<!\!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"<a\s[^>]*href=\"([^\"]+)\"", re.I)


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with code spans blanked."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        yield n, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda s: " " * len(s.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces → '-'."""
    h = re.sub(r"`", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    fence = None
    for line in text.splitlines():
        m = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
        if m:
            fence = None if fence else m.group(1)
            continue
        if fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else f"{s}-{k}")
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
        out.add(m.group(1))
    return out


def markdown_files():
    """README.md, docs/**/*.md and the repository's other Markdown files (packaging READMEs…)."""
    files = set()
    skip = {".git", "target", "node_modules"}
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in skip and not x.startswith("target")]
        files.update(os.path.join(d, n) for n in names if n.endswith(".md"))
    return sorted(files)


def check_links(path, problems):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, line in prose_lines(text):
        targets = [m.group(1) for r in (LINK, IMAGE, HREF) for m in r.finditer(line)]
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):  # http:, https:, mailto:
                continue
            file_part, _, frag = t.partition("#")
            target = path if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(path), file_part))
            if not target.startswith(ROOT + os.sep) and target != ROOT:
                problems.append(f"{rel}:{n}: link {t!r} leaves the repository")
                continue
            if not os.path.exists(target):
                problems.append(f"{rel}:{n}: link {t!r}: {os.path.relpath(target, ROOT)} does not exist")
                continue
            if frag and target.endswith(".md") and os.path.isfile(target):
                if frag not in anchors(target):
                    problems.append(f"{rel}:{n}: link {t!r}: no heading #{frag} in {os.path.relpath(target, ROOT)}")


def check_index(problems):
    index = os.path.join(ROOT, "docs", "README.md")
    with open(index, encoding="utf-8") as f:
        text = f.read()
    linked = set()
    for _, line in prose_lines(text):
        for m in LINK.finditer(line):
            t = m.group(1).partition("#")[0]
            if t and not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):
                linked.add(os.path.normpath(os.path.join(ROOT, "docs", t)))
    for d, _, names in os.walk(os.path.join(ROOT, "docs")):
        for name in names:
            p = os.path.join(d, name)
            if p != index and p not in linked:
                problems.append(f"docs/README.md: {os.path.relpath(p, ROOT)} is not in the index (add a row with what it covers)")


def check_readme(problems):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    lines = len(readme.splitlines())
    if lines > MAX_README_LINES:
        problems.append(f"README.md: {lines} lines, more than {MAX_README_LINES}: move feature text to docs/guide/")
    blocks = re.findall(r"^```sh\n(.*?)^```", readme, re.M | re.S)
    commands = [b.strip() for b in blocks]
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    m = re.search(r'^step "tests \(README test command\)"\n(.+)$', ci, re.M)
    if not m:
        problems.append(".ci/run: no step \"tests (README test command)\" followed by the command")
    elif m.group(1).strip() not in commands:
        problems.append(f"README.md: the test command .ci/run runs ({m.group(1).strip()!r}) is not one of the README's sh blocks {commands}")
    if not any(c.startswith("cargo run") and "daemon" in c for c in commands):
        problems.append(f"README.md: no sh block runs the appliance (cargo run … daemon): {commands}")


CITING = ["src", "scripts", "tests", "templates", "static", "benches", "fuzz", "contrib", ".ci"]
CITED = re.compile(r"(?<![\w/.-])docs/[A-Za-z0-9_./-]*?\.md\b")


def check_cited(problems):
    for top in CITING:
        for d, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if not x.startswith("target") and x not in ("corpus", "artifacts")]
            for name in sorted(names):
                path = os.path.join(d, name)
                if os.path.abspath(path) == os.path.abspath(__file__):
                    continue  # this checker's own made-up tree
                try:
                    with open(path, encoding="utf-8") as f:
                        text = f.read()
                except (UnicodeDecodeError, OSError):
                    continue
                for n, line in enumerate(text.splitlines(), 1):
                    for m in CITED.finditer(line):
                        if not os.path.isfile(os.path.join(ROOT, m.group(0))):
                            problems.append(f"{os.path.relpath(path, ROOT)}:{n}: names {m.group(0)}, which does not exist")


def problems_in(root):
    global ROOT
    ROOT = root
    problems = []
    check_readme(problems)
    for p in markdown_files():
        check_links(p, problems)
    check_index(problems)
    check_cited(problems)
    return problems


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(t, rel)), exist_ok=True)
            with open(os.path.join(t, rel), "w", encoding="utf-8") as f:
                f.write(text)
        put(".ci/run", 'step "tests (README test command)"\nscripts/test.sh\n')
        put("README.md", "# x\n\n```sh\ncargo run --release -- daemon\n```\n\n```sh\nscripts/tests.sh\n```\n"
            "[ok](docs/guide/a.md) [gone](docs/gone.md)\n" + "\n" * 250)
        put("docs/README.md", "[a](guide/a.md) [b](b.md)\n")
        put("docs/b.md", "## 2. A run's path\n[ok](guide/a.md#the-a-page) [frag](guide/a.md#nope)\n"
            "`[code](nope1.md)`\n```\n[fence](nope2.md)\n```\n[up](../../out.md) [web](https://x/y.md)\n"
            "[self](#2-a-runs-path)\n")
        put("docs/guide/a.md", "# The A page\n[back](../b.md)\n")
        put("docs/extra.md", "not indexed\n")
        put("src/x.rs", "// see docs/b.md §2 and docs/guide/a.md\n// see docs/moved.md §3\n")
        got = problems_in(t)
    want = ["README.md: 260 lines", "scripts/test.sh", "README.md:10: link 'docs/gone.md'",
            "docs/b.md:2: link 'guide/a.md#nope'", "docs/b.md:7: link '../../out.md' leaves",
            "docs/extra.md is not in the index", "src/x.rs:2: names docs/moved.md"]
    missing = [w for w in want if not any(w in g for g in got)]
    extra = [g for g in got if not any(w in g for w in want)]
    for m in missing:
        print(f"check-docs self-test: not reported: {m}")
    for e in extra:
        print(f"check-docs self-test: reported wrongly: {e}")
    if missing or extra:
        print("check-docs self-test: FAILED")
        return 1
    print(f"check-docs self-test: ok ({len(got)} made-up mistakes reported, none else)")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if sys.argv[1:]:
        print(__doc__)
        return 2
    problems = problems_in(ROOT)
    for p in problems:
        print(f"check-docs: {p}")
    if problems:
        print(f"check-docs: FAILED ({len(problems)} problems)")
        return 1
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = len(f.read().splitlines())
    print(f"check-docs: ok (README.md {lines} lines; the links of {len(markdown_files())} "
          "Markdown files resolve; docs/README.md lists every file under docs/; every docs/ path "
          "the code names exists)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
