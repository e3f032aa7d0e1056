#!/usr/bin/env python3
"""Checks Strata's size limits on C++ sources: no file over MAX_FILE_LINES
lines and no function body over MAX_FUNCTION_LINES lines (namespace-scope
functions and out-of-line methods, whose body opens at the end of a
signature line and closes with a '}' in column 0). Exceptions are listed in
ALLOWED with the reason. Prints each violation and exits 1 if there is one.

Usage: tools/check_sizes.py [repository root]
"""
import os
import re
import sys

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120
# (path, function name): why it may be longer.
ALLOWED = {
    ("serialization/pickle_reader.cc", "Step"):
        "the pickle interpreter's opcode switch, one case per opcode",
}
NOT_FUNCTIONS = re.compile(
    r"^(namespace|class|struct|enum|union|extern|template\s*<[^>]*>\s*(class|struct))\b")


def functions(lines):
    """Yields (name, first_line, length) for each top-level function body."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if (line and not line[0].isspace() and line.rstrip().endswith("{")
                and not line.startswith(("#", "//", "}"))
                and not NOT_FUNCTIONS.match(line)
                and "=" not in line.split("(")[0]):
            # The signature may start on earlier lines; find the name.
            start = i
            while start > 0 and lines[start - 1].strip() and not lines[start - 1].rstrip().endswith((";", "}", "{")) \
                    and not lines[start - 1].startswith(("//", "#")):
                start -= 1
            signature = " ".join(l.strip() for l in lines[start:i + 1])
            m = re.search(r"([A-Za-z_~][A-Za-z0-9_:~]*(?:operator\S*)?)\s*\(", signature)
            name = m.group(1).split("::")[-1] if m else "?"
            j = i + 1
            while j < len(lines) and not lines[j].startswith("}"):
                j += 1
            yield name, i + 1, j - i - 1
            i = j
        i += 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "bazel-", "build"))]
        for f in filenames:
            if not f.endswith((".cc", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            if len(lines) > MAX_FILE_LINES:
                problems.append(f"{rel}: {len(lines)} lines (limit {MAX_FILE_LINES})")
            for name, first, length in functions(lines):
                if length > MAX_FUNCTION_LINES and (rel, name) not in ALLOWED:
                    problems.append(f"{rel}:{first}: function {name} is {length} lines "
                                    f"(limit {MAX_FUNCTION_LINES})")
    for p in problems:
        print(p)
    if problems:
        print(f"check_sizes: {len(problems)} over the limits; split them or list them in ALLOWED with a reason")
        return 1
    print("check_sizes: every file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
