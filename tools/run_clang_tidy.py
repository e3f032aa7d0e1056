#!/usr/bin/env python3
"""Runs clang-tidy (the repository's .clang-tidy) over every Strata source of
a compile database, in parallel, with Strata's own headers included in the
analysis. One case per source file: passed when clang-tidy reports nothing.
Findings go to --log and the first ones to stdout; the last line is
"N passed, N failed, 0 skipped".

Usage: run_clang_tidy.py COMPILE_COMMANDS_JSON --root REPO [--jobs N] [--log FILE]
                         [--changed-since REV]
  --changed-since REV: only the sources changed since git revision REV, and
      the sources of the headers changed since (a.h's a.cc and a_test.cc):
      the whole tree takes hours on two cores, a change's files minutes.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

PACKAGES = ("base", "benchmarks", "checkpoint", "comm", "data", "launch", "models", "optim",
            "serialization", "strategies", "tools")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("compile_commands")
    parser.add_argument("--root", required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--log", default=os.devnull)
    parser.add_argument("--clang-tidy", default="clang-tidy")
    parser.add_argument("--changed-since")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    with open(args.compile_commands) as f:
        entries = json.load(f)
    files = sorted({os.path.abspath(e["file"]) for e in entries
                    if os.path.relpath(os.path.abspath(e["file"]), root).split(os.sep)[0]
                    in PACKAGES})
    if args.changed_since:
        diff = subprocess.run(["git", "-C", root, "diff", "--name-only", args.changed_since],
                              capture_output=True, text=True, check=True).stdout.split()
        stems = {os.path.join(root, os.path.splitext(d)[0]) for d in diff}
        stems |= {s + "_test" for s in stems}
        files = [f for f in files if os.path.splitext(f)[0] in stems]
        print(f"run_clang_tidy: {len(files)} sources changed since {args.changed_since}",
              file=sys.stderr)
        if not files:
            print("0 passed, 0 failed, 0 skipped")
            return 0
    if not files:
        print(f"run_clang_tidy: no Strata source in {args.compile_commands}")
        print("0 passed, 1 failed, 0 skipped")
        return 1
    header_filter = "^" + root + "/(" + "|".join(PACKAGES) + ")/"
    build_dir = os.path.dirname(os.path.abspath(args.compile_commands))

    def tidy(path):
        p = subprocess.run(
            [args.clang_tidy, "-p", build_dir, "--quiet", f"--header-filter={header_filter}",
             "--extra-arg=-Wno-unknown-warning-option",
             "--extra-arg=-Wno-unused-command-line-argument", path],
            capture_output=True, text=True)
        findings = [l for l in p.stdout.splitlines() if ": warning: " in l or ": error: " in l]
        return path, p.returncode, findings, p.stdout + p.stderr

    passed = failed = 0
    shown = 0
    with open(args.log, "w") as log, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for i, (path, rc, findings, output) in enumerate(pool.map(tidy, files), 1):
            rel = os.path.relpath(path, root)
            if rc == 0 and not findings:
                passed += 1
            else:
                failed += 1
                log.write(f"==== {rel}\n{output}\n")
                for line in findings[:max(0, 40 - shown)]:
                    print(line.replace(root + "/", ""))
                    shown += 1
            if i % 25 == 0:
                print(f"run_clang_tidy: {i}/{len(files)} files, {failed} with findings",
                      file=sys.stderr)
    print(f"{passed} passed, {failed} failed, 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
