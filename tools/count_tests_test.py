#!/usr/bin/env python3
"""Checks tools/count_tests.py on made-up runs: skips count as skipped, a
crashed test as a failure, ctest's and Bazel's inputs alike. Exits 1 on the
first wrong count.

Usage: tools/count_tests_test.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GTEST_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="S" tests="4">
<testcase name="Passes" status="run" result="completed" classname="S"/>
<testcase name="Skips" status="run" result="skipped" classname="S"><skipped message="needs a GPU"/></testcase>
<testcase name="DISABLED_Off" status="notrun" result="suppressed" classname="S"/>
<testcase name="Fails" status="run" result="completed" classname="S"><failure message="x"/></testcase>
</testsuite></testsuites>
"""
PASS_XML = """<testsuites><testsuite><testcase name="A" classname="S"/></testsuite></testsuites>"""


def run(args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "count_tests.py")] + args,
                       capture_output=True, text=True)
    return p.returncode, p.stdout.strip().splitlines()[-1], p.stdout


def expect(what, got, want):
    if got != want:
        print(f"count_tests_test: {what}: got {got!r}, want {want!r}")
        sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        mixed = os.path.join(d, "mixed.xml")
        passing = os.path.join(d, "pass.xml")
        open(mixed, "w").write(GTEST_XML)
        open(passing, "w").write(PASS_XML)
        bep = os.path.join(d, "bep.json")

        def result(label, status, xml):
            uri = "file://" + xml if xml else None
            outputs = [{"name": "test.xml", "uri": uri}] if uri else []
            return {"id": {"testResult": {"label": label, "run": 1, "shard": 1}},
                    "testResult": {"status": status, "testActionOutput": outputs}}

        with open(bep, "w") as f:
            for event in (result("//a:mixed", "FAILED", mixed),
                          result("//a:ok", "PASSED", passing),
                          result("//a:crashed", "FAILED", None),
                          result("//a:exit_code", "FAILED", passing)):
                f.write(json.dumps(event) + "\n")
        not_run = os.path.join(d, "not_run.tsv")
        open(not_run, "w").write("//g:nccl_test\tneeds a CUDA build\n")
        checks = os.path.join(d, "checks.tsv")
        open(checks, "w").write("sizes\tpassed\nformat\tfailed\n")
        rc, line, out = run(["bazel", bep, "3", "--checks", checks, "--not-run", not_run])
        # passed: mixed 1 + ok 1 + sizes 1; failed: mixed's Fails, crashed,
        # exit_code (XML passes but the test failed), format; skipped: Skips,
        # DISABLED_Off, nccl_test.
        expect("bazel counts", line, "3 passed, 4 failed, 3 skipped")
        expect("bazel exit status", rc, 1)
        expect("skip reason listed", "skipped: //a:mixed S.Skips: needs a GPU" in out, True)

        bep_ok = os.path.join(d, "bep_ok.json")
        with open(bep_ok, "w") as f:
            f.write(json.dumps(result("//a:ok", "PASSED", passing)) + "\n")
        rc, line, _ = run(["bazel", bep_ok, "0"])
        expect("clean run", (rc, line), (0, "1 passed, 0 failed, 0 skipped"))
        rc, line, _ = run(["bazel", bep_ok, "1"])
        expect("failing runner with nothing failed", (rc, line), (1, "1 passed, 1 failed, 0 skipped"))

        logs = os.path.join(d, "testlogs")
        os.makedirs(os.path.join(logs, "a", "mixed"))
        os.makedirs(os.path.join(logs, "a", "ok"))
        open(os.path.join(logs, "a", "mixed", "test.xml"), "w").write(GTEST_XML)
        open(os.path.join(logs, "a", "ok", "test.xml"), "w").write(PASS_XML)
        junit = os.path.join(d, "junit.xml")
        open(junit, "w").write(
            '<testsuite><testcase name="//a:mixed" status="fail"><failure message="Failed"/></testcase>'
            '<testcase name="//a:ok" status="run"/>'
            '<testcase name="//a:missing" status="run"/>'
            '<testcase name="//a:gone" status="notrun"/></testsuite>')
        rc, line, _ = run(["ctest", junit, logs, "8"])
        expect("ctest counts", (rc, line), (1, "2 passed, 3 failed, 2 skipped"))
        # One JUnit file per ctest call, read from their directory.
        calls = os.path.join(d, "junit")
        os.makedirs(calls)
        open(os.path.join(calls, "1.xml"), "w").write(
            '<testsuite><testcase name="//a:ok" status="run"/></testsuite>')
        open(os.path.join(calls, "2.xml"), "w").write(
            '<testsuite><testcase name="//a:mixed" status="fail"><failure message="Failed"/></testcase></testsuite>')
        rc, line, _ = run(["ctest", calls, logs, "8"])
        expect("ctest directory counts", (rc, line), (1, "2 passed, 1 failed, 2 skipped"))
    print("count_tests_test: every count as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
