"""labgrid example: run a saved netperfd suite on the board and gate on its verdict.

    pip install labgrid pytest
    NETPERFD_PEER=192.0.2.2 pytest --lg-env env.yaml test_netperfd.py --junitxml=host.xml

The board boots (ShellStrategy: power on, log in on the serial console), runs
`netperfd suite run SUITE --peer PEER --lava --junit FILE` against a PC running stock
`iperf3 -s`, and the test passes on exit 0 (PASS), fails on 1 (FAIL: the failing steps and
reasons are in the message) and errors on 2 (the suite could not run: unknown suite, peer
unreachable). Each step's result and bitrate (from the LAVA lines) are recorded as pytest
properties, and the board's own JUnit report is copied next to the host's
(NETPERFD_JUNIT_OUT) for Jenkins or GitLab.
"""

import os
import re
import shlex

import pytest

PEER = os.environ.get("NETPERFD_PEER", "192.0.2.2")
SUITE = os.environ.get("NETPERFD_SUITE", "seed 001 table")
BIND_DEV = os.environ.get("NETPERFD_BIND_DEV", "")
DATA = os.environ.get("NETPERFD_DATA", "/var/lib/netperfd")
REMOTE_JUNIT = "/tmp/netperfd-junit.xml"
LOCAL_JUNIT = os.environ.get("NETPERFD_JUNIT_OUT", "netperfd-board-junit.xml")

LAVA = re.compile(
    r"<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=(\S+) RESULT=(pass|fail)"
    r"(?: MEASUREMENT=(\S+) UNITS=(\S+))?>"
)


@pytest.fixture(scope="module")
def shell(target, strategy):
    strategy.transition("shell")
    return target.get_driver("CommandProtocol")


def test_netperfd_suite(target, shell, record_property):
    cmd = ["netperfd", "suite", "run", SUITE, "--peer", PEER, "--data", DATA,
           "--lava", "--junit", REMOTE_JUNIT]
    if BIND_DEV:
        cmd += ["--bind-dev", BIND_DEV]
    # A suite of 8 x 10 s tests takes about 1.5 min; allow for longer definitions.
    stdout, stderr, rc = shell.run(" ".join(shlex.quote(a) for a in cmd), timeout=3600)
    steps = [LAVA.search(line) for line in stdout]
    for m in filter(None, steps):
        record_property(m[1], m[2] + (f" {m[3]} {m[4]}" if m[3] else ""))
    try:
        target.get_driver("SSHDriver").get(REMOTE_JUNIT, LOCAL_JUNIT)
    except Exception as e:  # the verdict still counts without the copy
        print(f"could not copy {REMOTE_JUNIT}: {e}")
    text = "\n".join(stdout + stderr)
    if rc == 2:
        raise RuntimeError(f"netperfd suite '{SUITE}' could not run against {PEER}:\n{text}")
    assert rc == 0, f"netperfd suite '{SUITE}' FAILED its thresholds:\n{text}"
