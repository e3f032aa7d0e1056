#!/usr/bin/env python3
"""Checks that the CMake build mirrors the Bazel build, target for target.

Every package's CMakeLists.txt declares its targets with the rules of
cmake/strata.cmake (strata_cc_library, strata_cc_binary, strata_cc_test,
strata_sh_test, strata_cc_proto_library, strata_build_info_cc,
strata_system_library), in Bazel's label syntax. This compares them with
`bazel query --output=xml 'kind(rule, //...)'`:

  * every cc_library, cc_binary, cc_test, sh_test, strata_cc_proto_library and
    genrule of a BUILD file has a CMake rule of the same label and kind, and
    every CMake rule a Bazel one (//third_party's wrappers: by name only);
  * their srcs, hdrs, deps, data, copts, linkopts, size (a test's default is
    medium), tags, testonly, args and env are equal (labels normalised: ":x",
    "//pkg" and plain file paths become "//pkg:name"; DATA globs are
    expanded; ${STRATA_COPTS} is tools/build_defs/copts.bzl's list);
  * a Bazel rule of another kind, or an attribute cmake/strata.cmake has no
    counterpart for, is reported too: the CMake rules need extending first.

Only CMakeLists.txt files reached from the top-level one through
add_subdirectory() count. Prints each difference and exits 1 if there is one.

Usage: tools/check_cmake_sync.py                  (runs bazel query)
       tools/check_cmake_sync.py --bazel-xml FILE (a saved query's output)
       tools/check_cmake_sync.py --self-test      (checks the checker)
"""
import ast
import glob
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# Rule attributes the comparison covers (besides the name), by Bazel kind.
COMPARED = {
    "cc_library": ["srcs", "hdrs", "deps", "copts", "linkopts", "tags", "testonly"],
    "cc_binary": ["srcs", "deps", "data", "copts", "linkopts", "tags", "testonly"],
    "cc_test": ["srcs", "deps", "data", "copts", "linkopts", "tags", "size", "args", "env"],
    "sh_test": ["srcs", "data", "tags", "size", "args", "env"],
    "proto": ["src", "deps"],
    "genrule": ["outs"],
    "system": [],
}
# Attributes that mean nothing to the CMake build.
IGNORED_ATTRIBUTES = {"name", "visibility", "generator_function", "generator_name",
                      "generator_location"}
# Attributes of a //third_party wrapper: the CMake wrapper gets the same from
# find_package().
SYSTEM_ATTRIBUTES = {"linkopts", "deps", "defines", "testonly"}
# A genrule's own attributes: strata_build_info_cc is its CMake rule.
GENRULE_ATTRIBUTES = {"outs", "cmd", "stamp", "srcs"}
# Label-valued attributes: normalised, order does not matter.
LABEL_ATTRIBUTES = {"srcs", "hdrs", "deps", "data", "outs", "src"}
# The CMake rules and the Bazel kind each declares.
CMAKE_RULES = {
    "strata_cc_library": "cc_library",
    "strata_cc_binary": "cc_binary",
    "strata_cc_test": "cc_test",
    "strata_sh_test": "sh_test",
    "strata_cc_proto_library": "proto",
    "strata_build_info_cc": "genrule",
    "strata_system_library": "system",
}
# CMake keyword -> attribute, per rule (options are flags).
CMAKE_KEYWORDS = {
    "NAME": "name", "SRCS": "srcs", "HDRS": "hdrs", "DEPS": "deps", "DATA": "data",
    "COPTS": "copts", "LINKOPTS": "linkopts", "SIZE": "size", "TAGS": "tags",
    "ARGS": "args", "ENV": "env", "SRC": "src", "OUT": "outs", "LIBS": "libs",
    "DEFINES": "defines",
}
CMAKE_OPTIONS = {"TESTONLY": "testonly"}

HOW_TO_FIX = """\
The CMake build no longer mirrors the Bazel build. Edit the package's
CMakeLists.txt (next to its BUILD file) so that its strata_* rules carry the
same names, srcs, hdrs, deps, data, copts, linkopts, size and tags as the BUILD
file's rules (labels as in BUILD: ":group", "//comm:group"; see
cmake/strata.cmake). A new package needs a CMakeLists.txt and an
add_subdirectory() line in the top-level CMakeLists.txt; a new //third_party
wrapper, a strata_system_library() in third_party/CMakeLists.txt."""


class Rule:
    """One target: kind, label and its compared attributes."""

    def __init__(self, kind, label, where):
        self.kind = kind
        self.label = label
        self.where = where
        self.attrs = {}


def split_label(label, package):
    """Returns (package, name) of a label relative to `package`."""
    if label.startswith("//"):
        body = label[2:]
        if ":" in body:
            pkg, name = body.split(":", 1)
        else:
            pkg, name = body, body.rsplit("/", 1)[-1]
        return pkg, name
    if label.startswith(":"):
        return package, label[1:]
    return package, label


def canonical(label, package):
    pkg, name = split_label(label, package)
    return f"//{pkg}:{name}"


def read_strata_copts(root):
    """STRATA_COPTS of tools/build_defs/copts.bzl, as cmake/strata.cmake reads it."""
    with open(os.path.join(root, "tools/build_defs/copts.bzl"), encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"#[^\n]*", "", text)
    m = re.search(r"STRATA_COPTS = (\[[^\]]*\])", text)
    if not m:
        sys.exit("check_cmake_sync: no STRATA_COPTS = [...] in tools/build_defs/copts.bzl")
    return list(ast.literal_eval(m.group(1)))


# --- Bazel -----------------------------------------------------------------

def bazel_query_xml(root):
    out = subprocess.run(
        ["bazel", "query", "--noshow_progress", "kind(rule, //...)", "--output=xml"],
        cwd=root, capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        sys.exit("check_cmake_sync: bazel query failed")
    return out.stdout


def xml_value(element):
    if element.tag == "list":
        return [xml_value(child) for child in element]
    if element.tag == "dict":
        return {xml_value(pair[0]): xml_value(pair[1]) for pair in element}
    if element.tag == "pair":
        return [xml_value(child) for child in element]
    return element.get("value")


def bazel_rules(xml_text, root):
    """Returns ({label: Rule}, [problems]) from `bazel query --output=xml`."""
    parsed = {}
    for element in ET.fromstring(xml_text).iter("rule"):
        attrs = {}
        for child in element:
            if child.tag in ("rule-input", "rule-output"):
                continue
            attrs[child.get("name")] = xml_value(child)
        parsed[element.get("name")] = (element.get("class"), element.get("location"), attrs)

    rules, problems = {}, []
    for label, (kind, location, attrs) in parsed.items():
        package = label[2:].split(":", 1)[0]
        where = re.sub(r":\d+$", "", location or "")  # BUILD:line
        if where.startswith(root + os.sep):
            where = where[len(root) + 1:]
        generator = attrs.get("generator_function")
        if generator == "strata_cc_proto_library":
            if kind != "cc_library":
                continue  # Its genrule and filegroup: part of the macro.
            rule = Rule("proto", label, where)
            genrule = parsed.get(label + "_genproto")
            src = genrule[2].get("srcs", [None])[0] if genrule else None
            rule.attrs["src"] = [src] if src else []
            rule.attrs["deps"] = [d for d in attrs.get("deps", [])
                                  if d != "//third_party:protobuf"]
            rules[label] = rule
            continue
        if kind == "config_setting":
            continue  # select() keys; the CMake build uses options.
        if package == "third_party" and kind == "cc_library" and not attrs.get("srcs"):
            rule = Rule("system", label, where)
            unknown = set(attrs) - IGNORED_ATTRIBUTES - SYSTEM_ATTRIBUTES
        elif kind == "genrule":
            rule = Rule("genrule", label, where)
            rule.attrs["outs"] = attrs.get("outs", [])
            unknown = set(attrs) - IGNORED_ATTRIBUTES - GENRULE_ATTRIBUTES
        elif kind in COMPARED:
            rule = Rule(kind, label, where)
            for attr in COMPARED[kind]:
                if attr in attrs:
                    rule.attrs[attr] = attrs[attr]
            unknown = set(attrs) - IGNORED_ATTRIBUTES - set(COMPARED[kind])
        else:
            problems.append(f"{label}: Bazel rule kind {kind} has no CMake counterpart "
                            "in cmake/strata.cmake")
            continue
        for attr in sorted(unknown):
            problems.append(f"{label}: attribute `{attr}` is not mirrored by "
                            "cmake/strata.cmake; extend its rules and this check")
        rules[label] = rule
    for rule in rules.values():
        normalise(rule)
    return rules, problems


def normalise(rule):
    """Brings a rule's attributes to one form for comparison."""
    package = rule.label[2:].split(":", 1)[0]
    attrs = rule.attrs
    for attr in LABEL_ATTRIBUTES & set(attrs):
        attrs[attr] = sorted({canonical(v, package) for v in attrs[attr]
                              if not v.startswith("@")})
    if rule.kind in ("cc_test", "sh_test"):
        attrs["size"] = attrs.get("size") or "medium"
    if "tags" in attrs:
        attrs["tags"] = sorted(set(attrs["tags"]))
    if "testonly" in attrs:
        attrs["testonly"] = attrs["testonly"] in (True, "true", "1", "True")
    if "env" in attrs and isinstance(attrs["env"], list):
        attrs["env"] = dict(item.split("=", 1) for item in attrs["env"])
    for attr in COMPARED[rule.kind]:
        if attr not in attrs:
            attrs[attr] = {"testonly": False, "env": {}}.get(attr, [])


# --- CMake -----------------------------------------------------------------

def cmake_commands(text):
    """Yields (name, [(argument, quoted)], line) for each command invocation."""
    i, line, n = 0, 1, len(text)

    def bracket_end(start):
        m = re.match(r"\[(=*)\[", text[start:])
        if not m:
            return None
        close = "]" + m.group(1) + "]"
        end = text.find(close, start + len(m.group(0)))
        return (len(text) if end < 0 else end + len(close)), len(m.group(0)), len(close)

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif c == "#":
            b = bracket_end(i + 1)
            end = b[0] if b else (text.find("\n", i) if "\n" in text[i:] else n)
            line += text.count("\n", i, end)
            i = end
        else:
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text[i:])
            if not m:
                raise ValueError(f"line {line}: unexpected {text[i]!r}")
            name, start_line = m.group(0), line
            i += len(m.group(0))
            while i < n and text[i] in " \t":
                i += 1
            if i >= n or text[i] != "(":
                raise ValueError(f"line {line}: expected '(' after {name}")
            i += 1
            args, depth = [], 0
            while True:
                if i >= n:
                    raise ValueError(f"line {start_line}: unterminated {name}(")
                c = text[i]
                if c == "\n":
                    line += 1
                    i += 1
                elif c.isspace():
                    i += 1
                elif c == "#":
                    b = bracket_end(i + 1)
                    end = b[0] if b else text.find("\n", i)
                    line += text.count("\n", i, end)
                    i = end
                elif c == "(":
                    depth += 1
                    args.append(("(", False))
                    i += 1
                elif c == ")":
                    if depth == 0:
                        i += 1
                        break
                    depth -= 1
                    args.append((")", False))
                    i += 1
                elif c == '"':
                    j, value = i + 1, []
                    while text[j] != '"':
                        if text[j] == "\\" and j + 1 < n:
                            value.append({"n": "\n", "t": "\t"}.get(text[j + 1], text[j + 1]))
                            j += 2
                        else:
                            value.append(text[j])
                            j += 1
                    line += text.count("\n", i, j)
                    args.append(("".join(value), True))
                    i = j + 1
                elif c == "[" and bracket_end(i):
                    end, opening, closing = bracket_end(i)
                    args.append((text[i + opening:end - closing], True))
                    line += text.count("\n", i, end)
                    i = end
                else:
                    m = re.match(r'(?:\$\{[^}]*\}|\\.|[^\s()#"\\])+', text[i:])
                    args.append((m.group(0), False))
                    i += len(m.group(0))
            yield name, args, start_line


def expand(args, variables, where):
    """Expands ${VAR} in the arguments; unquoted arguments split on ';'."""
    out = []
    for value, quoted in args:
        def substitute(m):
            if variables.get(m.group(1)) is None:
                raise KeyError(f"{where}: cannot evaluate ${{{m.group(1)}}}")
            return ";".join(variables[m.group(1)])
        value = re.sub(r"\$\{([A-Za-z0-9_]+)\}", substitute, value)
        if quoted:
            out.append(value)
        else:
            out.extend(v for v in value.split(";") if v)
    return out


def cmake_rules(root):
    """Returns ({label: Rule}, [problems]) from the CMakeLists.txt files the
    top-level one reaches through add_subdirectory()."""
    strata_copts = read_strata_copts(root)
    rules, problems = {}, []
    pending = [""]
    while pending:
        package = pending.pop(0)
        path = os.path.join(root, package, "CMakeLists.txt")
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8") as f:
                commands = list(cmake_commands(f.read()))
        except (OSError, ValueError) as e:
            problems.append(f"{rel}: {e}")
            continue
        variables = {"STRATA_COPTS": strata_copts}
        for name, args, line in commands:
            where = f"{rel}:{line}"
            try:
                if name == "add_subdirectory" and args:
                    sub = expand(args[:1], variables, where)[0]
                    pending.append(os.path.normpath(os.path.join(package, sub)))
                elif name == "set" and args and not any(v == "CACHE" for v, _ in args):
                    # A value this check cannot know (find_package results)
                    # is an error only where a compared rule uses it.
                    try:
                        variables[args[0][0]] = expand(args[1:], variables, where)
                    except KeyError:
                        variables[args[0][0]] = None
                elif name in CMAKE_RULES:
                    rule = cmake_rule(name, args, variables, package, where, root)
                    if rule.label in rules:
                        problems.append(f"{where}: {rule.label} is declared twice "
                                        f"(also {rules[rule.label].where})")
                    rules[rule.label] = rule
            except (KeyError, ValueError) as e:
                problems.append(str(e).strip("'\""))
    return rules, problems


def cmake_rule(command, args, variables, package, where, root):
    kind = CMAKE_RULES[command]
    attrs, keyword = {}, None
    for value, quoted in args:
        if not quoted and value in CMAKE_OPTIONS:
            attrs[CMAKE_OPTIONS[value]] = True
            keyword = None
        elif not quoted and value in CMAKE_KEYWORDS:
            keyword = CMAKE_KEYWORDS[value]
            attrs.setdefault(keyword, [])
        elif keyword is None:
            raise ValueError(f"{where}: {command}: unexpected argument {value}")
        elif kind == "system" and keyword != "name":
            continue  # find_package() results: not compared.
        else:
            attrs[keyword].extend(expand([(value, quoted)], variables, where))
    name = attrs.pop("name", [None])
    if len(name) != 1:
        raise ValueError(f"{where}: {command} needs one NAME")
    rule = Rule(kind, f"//{package}:{name[0]}", where)
    for attr in ("size",):
        if attr in attrs:
            attrs[attr] = attrs[attr][0] if attrs[attr] else ""
    if "env" in attrs:
        attrs["env"] = dict(v.split("=", 1) for v in attrs["env"])
    if "data" in attrs:
        attrs["data"] = expand_globs(attrs["data"], package, root)
    for attr in ("libs", "defines"):
        attrs.pop(attr, None)
    rule.attrs = {k: v for k, v in attrs.items() if k in COMPARED[kind]}
    normalise(rule)
    return rule


def expand_globs(items, package, root):
    out = []
    for item in items:
        if "*" in item and not item.startswith(("//", ":")):
            base = os.path.join(root, package)
            out.extend(os.path.relpath(p, base) for p in
                       sorted(glob.glob(os.path.join(base, item))) if os.path.isfile(p))
        else:
            out.append(item)
    return out


# --- Comparison --------------------------------------------------------------

def compare(bazel, cmake):
    problems = []
    for label in sorted(set(bazel) | set(cmake)):
        b, c = bazel.get(label), cmake.get(label)
        if c is None:
            problems.append(f"{label} ({b.kind}, {b.where}) has no CMake rule")
            continue
        if b is None:
            problems.append(f"{label} ({c.where}) is in CMake but not in any BUILD file")
            continue
        if b.kind != c.kind:
            problems.append(f"{label}: {b.kind} in BUILD but {c.kind} in CMake ({c.where})")
            continue
        for attr in COMPARED[b.kind]:
            bv, cv = b.attrs.get(attr), c.attrs.get(attr)
            if bv == cv:
                continue
            if attr in LABEL_ATTRIBUTES or attr == "tags":
                only_b = [v for v in bv if v not in cv]
                only_c = [v for v in cv if v not in bv]
                detail = "; ".join(filter(None, [
                    only_b and "only in BUILD: " + " ".join(only_b),
                    only_c and "only in CMake: " + " ".join(only_c)]))
            else:
                detail = f"BUILD {bv!r}, CMake {cv!r}"
            problems.append(f"{label}: {attr} differ ({c.where}): {detail}")
    return problems


def check(root, xml_text):
    """Returns ([problems], number of Bazel targets compared)."""
    bazel, problems = bazel_rules(xml_text, os.path.realpath(root))
    cmake, cmake_problems = cmake_rules(root)
    return problems + cmake_problems + compare(bazel, cmake), len(bazel)


def report(problems, count):
    for p in problems:
        print(p)
    if problems:
        print(f"\ncheck_cmake_sync: {len(problems)} differences\n\n{HOW_TO_FIX}")
        return 1
    print(f"check_cmake_sync: all {count} BUILD targets have their CMake twins")
    return 0


# --- Self-test ---------------------------------------------------------------

SELF_TEST_XML = """<?xml version="1.1" encoding="UTF-8" standalone="no"?>
<query version="2">
  <rule class="cc_library" location="/r/a/BUILD:1:1" name="//a:lib">
    <string name="name" value="lib"/>
    <list name="srcs"><label value="//a:lib.cc"/></list>
    <list name="hdrs"><label value="//a:lib.h"/></list>
    <list name="copts"><string value="-Wall"/></list>
    <list name="deps"><label value="//third_party:absl"/></list>
  </rule>
  <rule class="cc_test" location="/r/a/BUILD:9:1" name="//a:lib_test">
    <string name="name" value="lib_test"/>
    <string name="size" value="small"/>
    <list name="srcs"><label value="//a:lib_test.cc"/></list>
    <list name="data"><label value="//a:testdata/x.txt"/><label value="//a:tool"/></list>
    <list name="deps"><label value="//a:lib"/></list>
  </rule>
  <rule class="cc_binary" location="/r/a/BUILD:19:1" name="//a:tool">
    <string name="name" value="tool"/>
    <list name="srcs"><label value="//a:tool.cc"/></list>
    <list name="tags"><string value="benchmark"/></list>
    <list name="deps"><label value="//a:lib"/></list>
  </rule>
  <rule class="cc_test" location="/r/a/BUILD:29:1" name="//a:other_test">
    <string name="name" value="other_test"/>
    <list name="srcs"><label value="//a:other_test.cc"/></list>
    <list name="args"><string value="--fast"/></list>
  </rule>
  <rule class="cc_library" location="/r/third_party/BUILD:1:1" name="//third_party:absl">
    <string name="name" value="absl"/>
    <list name="linkopts"><string value="-labsl_strings"/></list>
  </rule>
  <rule class="py_test" location="/r/a/BUILD:39:1" name="//a:py_test">
    <string name="name" value="py_test"/>
  </rule>
</query>
"""

SELF_TEST_IN_SYNC = """\
add_subdirectory(a)  # The package.
add_subdirectory(third_party)
"""
SELF_TEST_A = """\
set(MY_COPTS "-Wall")
strata_cc_library(
  NAME lib
  SRCS lib.cc
  HDRS lib.h
  COPTS ${MY_COPTS}
  DEPS //third_party:absl
)
strata_cc_test(NAME lib_test SIZE small SRCS lib_test.cc DATA testdata/*.txt :tool DEPS :lib)
strata_cc_binary(NAME tool SRCS tool.cc TAGS benchmark DEPS //a:lib)
strata_cc_test(NAME other_test SRCS other_test.cc ARGS --fast)
"""
SELF_TEST_THIRD_PARTY = """\
strata_system_library(NAME absl LIBS absl::strings ${NOT_KNOWN_HERE})
"""


def self_test():
    failures = []

    def expect(name, problems, wanted):
        for w in wanted:
            if not any(w in p for p in problems):
                failures.append(f"{name}: no problem mentions {w!r}; got {problems}")
        if not wanted and problems:
            failures.append(f"{name}: expected no problems, got {problems}")

    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "a", "testdata"))
        os.makedirs(os.path.join(root, "third_party"))
        os.makedirs(os.path.join(root, "tools", "build_defs"))
        with open(os.path.join(root, "tools/build_defs/copts.bzl"), "w") as f:
            f.write('STRATA_COPTS = [\n    "-Wall",  # comment\n]\n')
        with open(os.path.join(root, "a", "testdata", "x.txt"), "w") as f:
            f.write("x")

        def write(path, text):
            with open(os.path.join(root, path), "w") as f:
                f.write(text)

        write("CMakeLists.txt", SELF_TEST_IN_SYNC)
        write("a/CMakeLists.txt", SELF_TEST_A)
        write("third_party/CMakeLists.txt", SELF_TEST_THIRD_PARTY)
        in_sync_xml = re.sub(r'\s*<rule class="py_test".*?</rule>', "", SELF_TEST_XML,
                             flags=re.S)
        expect("in sync", check(root, in_sync_xml)[0], [])
        expect("unknown rule kind", check(root, SELF_TEST_XML)[0],
               ["//a:py_test: Bazel rule kind py_test"])

        drifted = (SELF_TEST_A
                   .replace("DEPS //third_party:absl", "DEPS //third_party:absl :extra")
                   .replace("SIZE small", "SIZE large")
                   .replace("ARGS --fast", "")
                   .replace("TAGS benchmark", "")
                   .replace("HDRS lib.h", "HDRS lib.h other.h")
                   .replace("${MY_COPTS}", "${STRATA_COPTS} -O3")
                   + "strata_cc_library(NAME only_cmake SRCS x.cc)\n")
        write("a/CMakeLists.txt", drifted)
        expect("drift", check(root, in_sync_xml)[0], [
            "//a:lib: deps differ (a/CMakeLists.txt:2): only in CMake: //a:extra",
            "//a:lib: hdrs differ", "only in CMake: //a:other.h",
            "//a:lib: copts differ",
            "//a:lib_test: size differ", "BUILD 'small', CMake 'large'",
            "//a:other_test: args differ",
            "//a:tool: tags differ", "only in BUILD: benchmark",
            "//a:only_cmake (a/CMakeLists.txt:12) is in CMake but not in any BUILD file",
        ])

        write("a/CMakeLists.txt", SELF_TEST_A.replace(
            "strata_cc_test(NAME other_test SRCS other_test.cc ARGS --fast)\n", ""))
        write("CMakeLists.txt", "add_subdirectory(a)\n")
        expect("missing", check(root, in_sync_xml)[0], [
            "//a:other_test (cc_test, /r/a/BUILD:29) has no CMake rule",
            "//third_party:absl (system, /r/third_party/BUILD:1) has no CMake rule",
        ])
        write("a/CMakeLists.txt", SELF_TEST_A.replace("${MY_COPTS}", "${UNSET}"))
        expect("unknown variable", check(root, in_sync_xml)[0],
               ["a/CMakeLists.txt:2: cannot evaluate ${UNSET}"])
    for f in failures:
        print("FAIL", f)
    print("check_cmake_sync self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) == 3 and argv[1] == "--bazel-xml":
        with open(argv[2], encoding="utf-8") as f:
            xml_text = f.read()
    elif len(argv) == 1:
        xml_text = bazel_query_xml(root)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return report(*check(root, xml_text))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
