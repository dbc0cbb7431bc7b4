#!/usr/bin/env python3
"""Read back what `netperfd suite run --junit FILE --lava` wrote, for tests/farm.rs.

usage: farm_check.py JUNIT_FILE LAVA_STDOUT_FILE
Prints one JSON object: the JUnit file as junitparser (PyPI) reads it (suites, their
properties, testcases with their results) and the LAVA signal lines matched by a regex of
LAVA's `<LAVA_SIGNAL_TESTCASE ...>` syntax. The Rust test asserts on the values.
"""
import json
import re
import sys

from junitparser import JUnitXml, TestSuite

LAVA = re.compile(
    r"^<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=([A-Za-z0-9_.-]+) RESULT=(pass|fail)"
    r"(?: MEASUREMENT=([0-9]+(?:\.[0-9]+)?) UNITS=(\S+))?>$"
)


def main():
    xml = JUnitXml.fromfile(sys.argv[1])
    suites = [xml] if isinstance(xml, TestSuite) else list(xml)
    out = {"suites": [], "lava": [], "lava_lines": 0}
    for s in suites:
        cases = []
        for c in s:
            cases.append({
                "name": c.name,
                "classname": c.classname,
                "time": c.time,
                "passed": c.is_passed,
                "results": [
                    {"kind": type(r).__name__, "message": r.message, "type": r.type, "text": r.text}
                    for r in c.result
                ],
                "system_out": c.system_out,
            })
        out["suites"].append({
            "name": s.name,
            "tests": s.tests,
            "failures": s.failures,
            "errors": s.errors,
            "time": s.time,
            "hostname": s.hostname,
            "properties": {p.name: p.value for p in s.properties()},
            "cases": cases,
        })
    with open(sys.argv[2], encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        if "LAVA_SIGNAL" in line:
            out["lava_lines"] += 1
        m = LAVA.match(line)
        if m:
            out["lava"].append({
                "id": m[1],
                "result": m[2],
                "measurement": float(m[3]) if m[3] else None,
                "units": m[4],
            })
    print(json.dumps(out))


if __name__ == "__main__":
    main()
