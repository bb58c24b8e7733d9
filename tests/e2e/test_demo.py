"""Issue 8: `make demo` end to end, asserted from its timeline (it starts its own cluster); issue 28 item 10:
with `--keep` it leaves everything running and prints one command that stops all of it, engines included.

The run uses `--keep` and then that printed command, so the stop path a user takes by hand is the one
tested; the demo without `--keep` runs the same command itself (hack/demo.py `Demo.stop`).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from harness.cluster import ROOT, pid_running

STOP_PREFIX = "stop all of it with: "


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (attach's engines run in sessions of their own, still its children)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        children = {child for child, ppid in parents.items() if ppid == parent and pid_running(child)}
        todo += children - found
        found |= children
    return found


def test_demo_rolls_the_stall_once_recovers_and_keep_prints_one_command_that_stops_everything(
    tmp_path: Path,
) -> None:
    cluster_dir = tmp_path / "cluster"
    try:
        result = subprocess.run(
            [sys.executable, str(ROOT / "hack" / "demo.py"), "--workdir", str(tmp_path), "--load-seconds", "10",
             "--keep"],
            capture_output=True, text=True, timeout=900, check=False, cwd=ROOT,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
        summary = json.loads((tmp_path / "timeline.json").read_text())
        steps = [entry["step"] for entry in summary["timeline"]]

        def at(prefix: str) -> int:
            return next(i for i, step in enumerate(steps) if step.startswith(prefix))

        assert at("Ready:") < at("injecting") < at("detector:") < at("rolled") < at("Ready again") < at(STOP_PREFIX)
        assert "no forward progress" in steps[at("detector:")]
        assert summary["roll"]["reason"] == "Stalled"
        assert sum(1 for step in steps if step.startswith("rolled")) == 1
        assert STOP_PREFIX + shlex.join(summary["stop"]) in result.stdout

        engines = descendants(summary["processes"]["engines"])
        assert engines, "aissim attach runs no engine for the Ready pod"
        recorded = [*summary["pids"], *engines]
        assert all(pid_running(pid) for pid in recorded), "--keep stopped something"

        stop = subprocess.run(summary["stop"], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
        assert stop.returncode == 0, stop.stderr[-2000:]
        assert [pid for pid in recorded if pid_running(pid)] == []
        assert not cluster_dir.exists()
    finally:
        if cluster_dir.exists():  # a failed run must not leave a cluster behind
            subprocess.run([str(ROOT / "hack" / "local-cluster"), "down", str(cluster_dir)], check=False)
