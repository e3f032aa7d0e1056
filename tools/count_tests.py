#!/usr/bin/env python3
"""Prints "N passed, N failed" for one `bazel test` run, counting test cases.

Bazel's own summary counts targets, in a form CI does not recognise. This
reads the run's build-event stream (--build_event_json_file), so only the
tests of that run count (cached results included), and counts the GoogleTest
cases in each test's XML. A test whose XML is missing or empty (it crashed or
timed out first) counts as one failed case; so does a target that failed to
build, and a failing Bazel run in which nothing else failed.

Repository checks that are not GoogleTest cases (tools/repo_checks.sh: sizes,
layering, links, format, the CPU-only analysis) come in CHECKS_FILE, one line
"<name>\t<passed|failed>" each, and count one case each.

Usage: count_tests.py BEP_JSON_FILE BAZEL_EXIT_CODE [CHECKS_FILE]
Exit status: 0 iff nothing failed.
"""
import json
import sys
import urllib.parse
import xml.etree.ElementTree as ET


def count_xml(path):
    passed = failed = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("status") == "notrun":
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        else:
            passed += 1
    return passed, failed


def main():
    bep_path, bazel_rc = sys.argv[1], int(sys.argv[2])
    results = {}  # (label, run, shard) -> (status, xml path); last attempt wins
    unbuilt = set()
    try:
        with open(bep_path) as f:
            for line in f:
                event = json.loads(line)
                eid = event.get("id", {})
                if "testResult" in eid:
                    key = (eid["testResult"]["label"], eid["testResult"].get("run", 1),
                           eid["testResult"].get("shard", 1))
                    payload = event.get("testResult", {})
                    xml = None
                    for out in payload.get("testActionOutput", []):
                        if out.get("name") == "test.xml":
                            xml = urllib.parse.unquote(
                                urllib.parse.urlparse(out["uri"]).path)
                    results[key] = (payload.get("status", "NO_STATUS"), xml)
                elif "testSummary" in eid:
                    status = event.get("testSummary", {}).get("overallStatus")
                    if status in ("FAILED_TO_BUILD", "NO_STATUS", "INCOMPLETE"):
                        unbuilt.add(eid["testSummary"]["label"])
    except OSError as e:
        print(f"count_tests: cannot read {bep_path}: {e}", file=sys.stderr)

    passed = failed = 0
    for (label, _, _), (status, xml) in sorted(results.items()):
        try:
            if xml is None:
                raise ValueError("no test.xml")
            n_pass, n_fail = count_xml(xml)
            if n_pass + n_fail == 0:
                raise ValueError("no test cases in test.xml")
            if status != "PASSED" and n_fail == 0:
                raise ValueError(f"status {status}")
        except (OSError, ET.ParseError, ValueError) as e:
            print(f"count_tests: {label}: {e}; counting one failure",
                  file=sys.stderr)
            n_pass, n_fail = 0, 1
        passed += n_pass
        failed += n_fail
    for label in sorted(unbuilt - {k[0] for k in results}):
        print(f"count_tests: {label} did not build; counting one failure",
              file=sys.stderr)
        failed += 1
    if len(sys.argv) > 3:
        try:
            with open(sys.argv[3]) as f:
                for line in f:
                    name, _, result = line.strip().partition("\t")
                    if not name:
                        continue
                    if result == "passed":
                        passed += 1
                    else:
                        print(f"count_tests: check {name} failed",
                              file=sys.stderr)
                        failed += 1
        except OSError as e:
            print(f"count_tests: cannot read {sys.argv[3]}: {e}; counting one "
                  "failure", file=sys.stderr)
            failed += 1
    if bazel_rc != 0 and failed == 0:
        print(f"count_tests: bazel test exited with {bazel_rc} but no test "
              "failed (a build error?); counting one failure", file=sys.stderr)
        failed = 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
