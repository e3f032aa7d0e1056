#!/usr/bin/env python3
"""Counts the test cases of one test run: "N passed, N failed, N skipped".

Two runners are read the same way, case by case from each test's XML
(GoogleTest's, or the one a shell test writes to $XML_OUTPUT_FILE):

  count_tests.py bazel BEP_JSON BAZEL_EXIT_CODE [--checks FILE] [--not-run FILE]
      one `bazel test` run, from its build-event stream
      (--build_event_json_file): only the tests of that run count, cached
      results included.
  count_tests.py ctest JUNIT TESTLOGS_DIR CTEST_EXIT_CODE [--checks FILE] [--not-run FILE]
      ctest runs, from `ctest --output-junit` (each test's status: JUNIT is
      that file, or a directory of them, one per ctest call, all read) and
      the per-test XML cmake/run_test.sh has the test write under
      TESTLOGS_DIR/<package>/<name>/test.xml.

A case is skipped when its XML says so (GTEST_SKIP, a shell test's
<skipped/>) or it is disabled (status "notrun"). A test whose XML is missing
or empty, which crashed or timed out, or which failed to build counts as one
failed case; a test that failed with no failed case in its XML counts as one
failure too, as does a failing runner with nothing failed.

--checks FILE: repository checks (tools/repo_checks.sh), one line
"<name>\t<passed|failed>" each, one case each.
--not-run FILE: tests the run excluded on purpose, one line
"<label>\t<reason>" each (e.g. they need a GPU): one skipped case each.

Prints every skip with its reason and every failure, then the closing line.
Writes the three numbers to --totals FILE ("passed failed skipped") if given.
Exit status: 0 iff nothing failed.
"""
import argparse
import glob
import json
import os
import sys
import urllib.parse
import xml.etree.ElementTree as ET


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = []   # "what: why"
        self.skipped = []  # "what: why"

    def add_xml(self, label, path, runner_ok):
        """Adds the cases of one test's XML; raises ValueError if it holds
        none or disagrees with the runner's verdict."""
        passed = 0
        failed = []
        skipped = []
        for case in ET.parse(path).getroot().iter("testcase"):
            name = f"{label} {case.get('classname', '')}.{case.get('name', '')}".rstrip(".")
            skip = case.find("skipped")
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(f"{name}: failed")
            elif skip is not None or case.get("result") == "skipped":
                why = (skip.get("message") if skip is not None else None) or (
                    (skip.text or "").strip() if skip is not None else "")
                skipped.append(f"{name}: {why.strip() or 'skipped (no reason given)'}")
            elif case.get("status") == "notrun":
                skipped.append(f"{name}: disabled")
            else:
                passed += 1
        if passed + len(failed) + len(skipped) == 0:
            raise ValueError("no test cases in its XML")
        if not runner_ok and not failed:
            raise ValueError("the test failed (crash, timeout or exit code) with no failed case")
        self.passed += passed
        self.failed += failed
        self.skipped += skipped

    def add_test(self, label, xml_path, runner_ok, status_text):
        try:
            if xml_path is None or not os.path.exists(xml_path):
                raise ValueError("no test XML")
            self.add_xml(label, xml_path, runner_ok)
        except (OSError, ET.ParseError, ValueError) as e:
            self.failed.append(f"{label}: {e} ({status_text}); counted as one failure")

    def add_checks(self, path):
        try:
            with open(path) as f:
                for line in f:
                    name, _, result = line.strip().partition("\t")
                    if not name:
                        continue
                    if result == "passed":
                        self.passed += 1
                    else:
                        self.failed.append(f"check {name}: failed")
        except OSError as e:
            self.failed.append(f"checks file {path}: {e}; counted as one failure")

    def add_not_run(self, path):
        try:
            with open(path) as f:
                for line in f:
                    label, _, why = line.rstrip("\n").partition("\t")
                    if label:
                        self.skipped.append(f"{label}: not run: {why or 'no reason given'}")
        except OSError as e:
            self.failed.append(f"not-run file {path}: {e}; counted as one failure")

    def finish(self, runner, runner_rc, totals_path):
        if runner_rc != 0 and not self.failed:
            self.failed.append(f"{runner} exited with {runner_rc} but no test failed "
                               "(a build error?); counted as one failure")
        for s in self.skipped:
            print(f"skipped: {s}")
        for f in self.failed:
            print(f"FAILED: {f}")
        line = f"{self.passed} passed, {len(self.failed)} failed, {len(self.skipped)} skipped"
        print(line)
        if totals_path:
            os.makedirs(os.path.dirname(totals_path) or ".", exist_ok=True)
            with open(totals_path, "w") as f:
                f.write(f"{self.passed} {len(self.failed)} {len(self.skipped)}\n")
        return 0 if not self.failed else 1


def read_bep(path, tally):
    results = {}  # (label, run, shard, attempt order) -> (status, xml)
    unbuilt = set()
    try:
        with open(path) as f:
            for line in f:
                event = json.loads(line)
                eid = event.get("id", {})
                if "testResult" in eid:
                    tr = eid["testResult"]
                    key = (tr["label"], tr.get("run", 1), tr.get("shard", 1))
                    payload = event.get("testResult", {})
                    xml = None
                    for out in payload.get("testActionOutput", []):
                        if out.get("name") == "test.xml":
                            xml = urllib.parse.unquote(urllib.parse.urlparse(out["uri"]).path)
                    results[key] = (payload.get("status", "NO_STATUS"), xml)  # last attempt wins
                elif "testSummary" in eid:
                    status = event.get("testSummary", {}).get("overallStatus")
                    if status in ("FAILED_TO_BUILD", "NO_STATUS", "INCOMPLETE"):
                        unbuilt.add(eid["testSummary"]["label"])
    except (OSError, ValueError) as e:
        tally.failed.append(f"build-event file {path}: {e}; counted as one failure")
    for (label, _, _), (status, xml) in sorted(results.items()):
        tally.add_test(label, xml, status == "PASSED", f"status {status}")
    for label in sorted(unbuilt - {k[0] for k in results}):
        tally.failed.append(f"{label}: did not build; counted as one failure")


def read_junit(junit_path, tally):
    """The <testcase>s of a ctest JUnit file, or of every *.xml in a
    directory of them; an unreadable file is one failure."""
    if os.path.isdir(junit_path):
        paths = sorted(glob.glob(os.path.join(junit_path, "*.xml")))
    else:
        paths = [junit_path]
    cases = []
    for path in paths:
        try:
            cases.extend(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as e:
            tally.failed.append(f"ctest JUnit file {path}: {e}; counted as one failure")
    return cases


def read_ctest(junit_path, testlogs, tally):
    for case in read_junit(junit_path, tally):
        label = case.get("name", "?")
        status = case.get("status", "")
        if status in ("notrun", "disabled"):
            # ctest could not run it (a missing executable) or it is disabled.
            tally.failed.append(f"{label}: ctest status {status}; counted as one failure")
            continue
        package, _, name = label.lstrip("/").partition(":")
        xml = os.path.join(testlogs, package, name, "test.xml")
        tally.add_test(label, xml, status == "run" and case.find("failure") is None,
                       f"ctest status {status}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="runner", required=True)
    bazel = sub.add_parser("bazel")
    bazel.add_argument("bep")
    bazel.add_argument("rc", type=int)
    ctest = sub.add_parser("ctest")
    ctest.add_argument("junit")
    ctest.add_argument("testlogs")
    ctest.add_argument("rc", type=int)
    for p in (bazel, ctest):
        p.add_argument("--checks")
        p.add_argument("--not-run")
        p.add_argument("--totals")
    args = parser.parse_args()
    tally = Tally()
    if args.runner == "bazel":
        read_bep(args.bep, tally)
    else:
        read_ctest(args.junit, args.testlogs, tally)
    if args.checks:
        tally.add_checks(args.checks)
    if args.not_run:
        tally.add_not_run(args.not_run)
    return tally.finish(args.runner, args.rc, args.totals)


if __name__ == "__main__":
    sys.exit(main())
