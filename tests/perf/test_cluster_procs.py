"""`hack/local-cluster down DIR` stops what was recorded beside the cluster, and what descends from it.

Why: `make demo DEMO_ARGS=--keep` leaves the operator and `aissim attach` running, and attach's engines run
in sessions of their own; the stop must reach those too, a SIGSTOPped one included, and nothing it did not
record (tests/e2e/test_demo.py runs the whole path on a cluster).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from harness.cluster import pid_running
from tests.fixtures.examples import ROOT

# A stand-in for `aissim attach`: it starts one "engine" in a session of its own (as attach does) and a
# helper in its own group, prints their PIDs, and then waits; it ignores SIGTERM, as a wedged process would.
SUPERVISOR = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(engine.pid, helper.pid, flush=True)
time.sleep(600)
"""


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_procs", ROOT / "hack" / "lib" / "cluster_procs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def supervisor() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    yield proc
    if proc.poll() is None:  # the test failed before stopping it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_down_stops_a_recorded_group_and_the_groups_of_its_descendants_stopped_ones_included(
    tmp_path: Path, supervisor: subprocess.Popen[str]
) -> None:
    procs = load()
    assert supervisor.stdout is not None
    engine, helper = (int(pid) for pid in supervisor.stdout.readline().split())
    os.kill(engine, signal.SIGSTOP)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    procs.record(tmp_path, "engines", supervisor.pid, sys.executable)
    procs.GRACE_SECONDS = 1.0  # type: ignore[attr-defined]  # the supervisor ignores SIGTERM: the grace runs out and SIGKILL follows
    try:
        stopped = procs.stop_attached(tmp_path, log=lambda _: None)
        supervisor.wait()
        assert stopped == [supervisor.pid]
        assert [pid for pid in (engine, helper) if pid_running(pid)] == []
        assert pid_running(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_a_recorded_pid_now_running_something_else_is_left_alone(tmp_path: Path) -> None:
    procs = load()
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        procs.record(tmp_path, "operator", other.pid, sys.executable)  # recorded as python, now `sleep`
        assert procs.stop_attached(tmp_path, log=lambda _: None) == []
        assert pid_running(other.pid)
    finally:
        other.kill()
        other.wait()
