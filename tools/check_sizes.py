#!/usr/bin/env python3
"""Checks Strata's size limits on C++ sources: no file over MAX_FILE_LINES
lines and no function body over MAX_FUNCTION_LINES lines. Exceptions are
listed in ALLOWED with the reason. Prints each violation and exits 1 if
there is one.

Functions are found by matching braces over the source with comments,
string and character literals and preprocessor lines blanked out, so every
function body counts wherever it is and however its signature is laid out:
namespace-scope functions, out-of-line methods, methods defined inside a
class (nested classes too), constructors with initializer lists, and test
bodies (TEST(...) { ... }). Lambdas and blocks inside a function are part of
that function. A body's length is the number of lines strictly between the
line of its '{' and the line of its '}'.

Usage: tools/check_sizes.py [repository root]
       tools/check_sizes.py --self-test
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
    ("serialization/object_pickle.cc", "Step"):
        "the object pickle interpreter's opcode switch, one case per opcode",
}
SCOPE_KEYWORDS = re.compile(r"\b(namespace|class|struct|union|enum|extern)\b")
# What may stand right before a function body's '{': the parameter list's
# ')', a qualifier, or the '}' of a constructor's last brace initializer.
BODY_PRECEDERS = {")", "}", "const", "override", "final", "noexcept", "mutable", "try"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def blank_out(text):
    """Returns text with comments, literals and preprocessor lines replaced
    by spaces (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its backslash continuations.
            while i < n and not (text[i] == "\n" and text[i - 1] != "\\"):
                out.append("\n" if text[i] == "\n" else " ")
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _last_token(header):
    header = header.rstrip()
    if not header:
        return ""
    if header[-1].isalnum() or header[-1] == "_":
        m = re.search(r"[A-Za-z0-9_]+$", header)
        return m.group(0)
    return header[-1]


def _top_level_equals(header):
    depth = 0
    for i, c in enumerate(header):
        if c in "([<":
            depth += 1
        elif c in ")]>":
            depth -= 1
        elif c == "=" and depth <= 0:
            prev = header[i - 1] if i else ""
            nxt = header[i + 1] if i + 1 < len(header) else ""
            if prev not in "=!<>+-*/%&|^" and nxt != "=" and "operator" not in header[:i][-9:]:
                return True
    return False


def _function_name(header):
    m = re.search(r"\bTEST(_F|_P)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)", header)
    if m:
        return f"{m.group(2)}.{m.group(3)}"
    paren = header.find("(")
    if header[:paren].rstrip().endswith("operator"):
        paren = header.find("(", paren + 1)
    names = re.findall(r"(~?[A-Za-z_][A-Za-z0-9_]*|operator\s*\S+?)\s*(?:<[^()]*>)?\s*$",
                       header[:paren])
    return names[-1].strip() if names else "?"


def functions(text):
    """Yields (name, first_line, length) for each function body in text."""
    code = blank_out(text)
    stack = []  # per open brace: "scope", "function", "block" or "init"
    header_start = 0
    i, n = 0, len(code)
    line = 1
    starts = []  # (line of '{', name) for open function bodies
    while i < n:
        c = code[i]
        if c == "\n":
            line += 1
        elif c in ";":
            if not stack or stack[-1] == "scope":
                header_start = i + 1
        elif c == "{":
            enclosing = stack[-1] if stack else "scope"
            if enclosing != "scope":
                stack.append("block")
            else:
                header = " ".join(code[header_start:i].split())
                last = _last_token(header)
                if SCOPE_KEYWORDS.search(header.split("(")[0]) and "(" not in header:
                    stack.append("scope")
                    header_start = i + 1
                elif "(" in header and not _top_level_equals(header) and last in BODY_PRECEDERS:
                    stack.append("function")
                    starts.append((line, _function_name(header)))
                elif "(" in header and re.search(r"\)\s*:", header) and not _top_level_equals(header):
                    # A brace initializer in a constructor's initializer
                    # list: skip it; the header goes on.
                    depth = 1
                    j = i + 1
                    while j < n and depth:
                        if code[j] == "{":
                            depth += 1
                        elif code[j] == "}":
                            depth -= 1
                        elif code[j] == "\n":
                            line += 1
                        j += 1
                    i = j
                    continue
                elif SCOPE_KEYWORDS.search(header):
                    stack.append("scope")
                    header_start = i + 1
                else:
                    stack.append("init")  # an initializer: = {...}, array, lambda
        elif c == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "function":
                first, name = starts.pop()
                yield name, first, line - first - 1
            if not stack or stack[-1] == "scope":
                header_start = i + 1
        i += 1


def check_file(rel, text, problems):
    lines = text.split("\n")
    if len(lines) > MAX_FILE_LINES:
        problems.append(f"{rel}: {len(lines)} lines (limit {MAX_FILE_LINES})")
    for name, first, length in functions(text):
        if length > MAX_FUNCTION_LINES and (rel, name) not in ALLOWED:
            problems.append(f"{rel}:{first}: function {name} is {length} lines "
                            f"(limit {MAX_FUNCTION_LINES})")


SELF_TEST = r'''
namespace a {
// A comment with { braces } and "a string {".
absl::StatusOr<int>
LongSignature(int x,
              int y) {
  return x + y;
}
class C {
 public:
  C(int x) : x_(x), v_{1, 2} {
    x_ += 1;
  }
  int Inline() const {
    auto f = [](int v) { return v; };
    return f(x_);
  }
  struct Nested {
    void Deep() override {
      if (true) {
      }
    }
  };
 private:
  int x_ = 0;
  std::vector<int> v_ = {1, 2};
};
const char* kRaw = R"(not { a } function)";
TEST(Suite, Case) {
  EXPECT_EQ('{', '{');
}
int Sep() { return 1'000; }
}  // namespace a
'''
SELF_TEST_WANT = [("LongSignature", 5, 1), ("C", 10, 1), ("Inline", 13, 2),
                  ("Deep", 18, 2), ("Suite.Case", 28, 1), ("Sep", 31, -1)]


def self_test():
    got = list(functions(SELF_TEST.lstrip("\n")))
    if got != SELF_TEST_WANT:
        print(f"check_sizes self-test: got {got}, want {SELF_TEST_WANT}")
        return 1
    print("check_sizes self-test: every function found")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "bazel-", "build", "out"))]
        for f in filenames:
            if not f.endswith((".cc", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as fh:
                check_file(rel, fh.read(), problems)
    for p in sorted(problems):
        print(p)
    if problems:
        print(f"check_sizes: {len(problems)} over the limits; split them on a seam or list them "
              "in ALLOWED with a reason")
        return 1
    print("check_sizes: every file and function within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
