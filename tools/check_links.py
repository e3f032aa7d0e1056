#!/usr/bin/env python3
"""Checks the relative links of every Markdown file in the repository.

Every `[text](path)`, `[text](path#anchor)`, `![alt](path)` and reference
definition `[id]: path` in a *.md file (outside code spans and fenced code
blocks; indented code blocks are not recognised) whose target has no URL scheme (http:, https:, mailto:, ...) must
name a file or directory inside the repository. A link that leaves the
repository root (e.g. `../shared/DESIGN.md` from the root README) is broken
even if its target exists: a clone of the repository cannot follow it.
Links that are only an anchor (`#section`) are not checked. A target
starting with '/' is taken from the repository root.

Directories named bazel-* and .git are skipped. Prints each broken link as
`file:line: link` (file relative to the root) and exits 1 if there is any.

Usage: tools/check_links.py [repository root]   (default: this script's ../)
       tools/check_links.py --self-test          (checks the checker)
"""
import os
import re
import sys
import tempfile
import urllib.parse

SKIP_DIRS = {".git"}
# An inline link or image: [text](target) or [text](<target> "title").
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[^)]*)?\)")
# A reference definition: [id]: target
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+).*?\1")


def markdown_files(root):
    """Yields the paths of the *.md files under `root`, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith("bazel-"))
        for name in sorted(filenames):
            if name.endswith(".md"):
                yield os.path.join(dirpath, name)


def links(text):
    """Yields (line number, target) for each link outside code."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        m = FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        plain = CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)
        for m in INLINE_LINK.finditer(plain):
            yield number, m.group(1)
        m = REFERENCE_DEF.match(plain)
        if m:
            yield number, m.group(1)


def broken_links(root):
    """Returns [(file relative to root, line, link)] of the broken links."""
    root = os.path.abspath(root)
    broken = []
    for path in markdown_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        rel_file = os.path.relpath(path, root)
        for line, link in links(text):
            target = link[1:-1] if link.startswith("<") and link.endswith(">") else link
            if SCHEME.match(target) or target.startswith("#") or not target:
                continue
            target = urllib.parse.unquote(target.split("#", 1)[0].split("?", 1)[0])
            if not target:
                continue
            if target.startswith("/"):
                resolved = os.path.normpath(os.path.join(root, target.lstrip("/")))
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
            inside = os.path.relpath(resolved, root)
            if inside == ".." or inside.startswith(".." + os.sep) or not os.path.exists(resolved):
                broken.append((rel_file, line, link))
    return broken


def self_test():
    """Builds a small tree with good and bad links; returns 0 if the checker
    reports exactly the bad ones."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        os.makedirs(os.path.join(repo, "docs"))
        os.makedirs(os.path.join(repo, "pkg"))
        os.makedirs(os.path.join(repo, "bazel-out"))
        with open(os.path.join(tmp, "OUTSIDE.md"), "w") as f:
            f.write("# outside the repository\n")
        files = {
            "README.md": (
                "# Repo\n"
                "[ok](docs/A.md) and [ok anchor](docs/A.md#section) and [dir](pkg)\n"
                "[web](https://example.com/x.md) [mail](mailto:a@b.c) [self](#layout)\n"
                "[broken](docs/MISSING.md)\n"
                "[escapes](../OUTSIDE.md)\n"
                "`[in code](nowhere.md)` and ![image](pkg/README.md)\n"
                "```\n[in a fence](nowhere.md)\n```\n"
                "[ref]: docs/ALSO_MISSING.md\n"),
            "docs/A.md": "[up](../README.md) [root](/pkg/README.md) [deep](../../OUTSIDE.md)\n",
            "pkg/README.md": "[spaces](<../docs/A.md> \"title\")\n",
            "bazel-out/X.md": "[skipped](nowhere.md)\n",
        }
        for name, text in files.items():
            with open(os.path.join(repo, name), "w") as f:
                f.write(text)
        got = sorted(broken_links(repo))
        want = sorted([
            ("README.md", 4, "docs/MISSING.md"),
            ("README.md", 5, "../OUTSIDE.md"),
            ("README.md", 10, "docs/ALSO_MISSING.md"),
            (os.path.join("docs", "A.md"), 1, "../../OUTSIDE.md"),
        ])
        if got != want:
            print("check_links self-test FAILED")
            print("  expected:", want)
            print("  got:     ", got)
            return 1
    print("check_links self-test passed")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    broken = broken_links(root)
    for rel_file, line, link in broken:
        print(f"{rel_file}:{line}: {link}")
    if broken:
        print(f"{len(broken)} broken link(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
