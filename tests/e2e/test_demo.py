"""Issue 8: `make demo` end to end, asserted from its timeline (it starts and stops its own cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.cluster import ROOT, pid_running


def test_demo_reaches_ready_rolls_the_stall_once_and_recovers(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "demo.py"), "--workdir", str(tmp_path), "--load-seconds", "10"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    summary = json.loads((tmp_path / "timeline.json").read_text())
    steps = [entry["step"] for entry in summary["timeline"]]

    def at(prefix: str) -> int:
        return next(i for i, step in enumerate(steps) if step.startswith(prefix))

    assert at("Ready:") < at("injecting") < at("detector:") < at("rolled") < at("Ready again") < at("stopped every")
    assert "no forward progress" in steps[at("detector:")]
    assert summary["roll"]["reason"] == "Stalled"
    assert sum(1 for step in steps if step.startswith("rolled")) == 1
    assert steps[at("stopped every")] == "stopped every process"
    assert summary["pids"]
    assert [pid for pid in summary["pids"] if pid_running(pid)] == []
