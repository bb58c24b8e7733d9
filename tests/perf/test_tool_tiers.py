"""The test run's tiers and tool waits (conftest.py, harness/cluster.py build_tools).

Why it exists: on a cold machine CI only fits its time budget if the tests needing the slow tools (LWS,
promtool, kube-score) run last and everything else does not wait for them; and a test waiting on a build
must give up with a message that names the build, not hang until CI's limit.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import cluster
from harness.cluster import ROOT, ToolBuildError, build_tools


def collected_files(*paths: str) -> list[str]:
    """The test files in the order pytest would run them (first appearance of each)."""
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    files: list[str] = []
    for line in res.stdout.splitlines():
        name = line.split("::")[0]
        if "::" in line and name not in files:
            files.append(name)
    return files


def test_tests_run_in_tiers_by_the_tool_they_wait_for() -> None:
    given = [
        "tests/e2e/test_multinode.py",  # LWS
        "tests/score/test_kube_score.py",  # kube-score
        "tests/helm/test_prometheusrule.py",  # promtool
        "tests/e2e/test_why.py",  # the core set (a cluster)
        "tests/helm/test_values.py",  # helm only
        "tests/validation/test_crd.py",  # nothing
    ]
    assert collected_files(*given) == [
        "tests/validation/test_crd.py",
        "tests/helm/test_values.py",
        "tests/e2e/test_why.py",
        "tests/score/test_kube_score.py",
        "tests/helm/test_prometheusrule.py",
        "tests/e2e/test_multinode.py",
    ]


def test_a_wait_on_a_build_held_elsewhere_gives_up_with_the_stage_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = "v0.0.0-wait-test"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("AIS_HELM_VERSION", version)
    monkeypatch.setattr(cluster, "_built", {})
    monkeypatch.setattr(cluster, "_failed", {})
    tools = tmp_path / "ascend-operator" / "tools"
    tools.mkdir(parents=True)
    started: list[subprocess.Popen[str]] = []
    real_popen = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        proc: subprocess.Popen[str] = real_popen(*args, **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen)  # build_tools looks it up per call
    with (tools / f".lock-helm-{version}").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another invocation "building" helm
        with pytest.raises(ToolBuildError, match=r"hack/build-k8s.sh helm did not finish within 2s"):
            build_tools("helm", timeout=2)
        # the waiting script was stopped, not left queued on the lock
        assert len(started) == 1
        assert started[0].returncode is not None
        # asked again in the same run: fails at once instead of waiting a second time (no second script)
        with pytest.raises(ToolBuildError, match="did not finish"):
            build_tools("helm", timeout=2)
        assert len(started) == 1
    assert not (tools / f"helm-{version}").exists()  # nothing was built or stamped meanwhile
