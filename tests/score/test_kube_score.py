"""kube-score on what users install: the chart (`helm template`) and the engine objects (`aisctl render`).

Fails on any finding that allowlist.yaml does not keep with a reason, and on entries that keep nothing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helm.chart import CHART, Helm
from tests.score.kubescore import Allowed, Finding, findings, load_allowlist, score, stale, unexplained

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
TARGETS = ("engine", "chart", "chart-networkpolicy")
#: The chart's NetworkPolicy needs the API server's CIDRs; these are TEST-NET addresses for the render.
NETWORKPOLICY_SETS = ["networkPolicy.enabled=true", "networkPolicy.apiServer.cidrs={192.0.2.1/32}"]


def render(target: str, helm: Helm) -> str:
    if target == "engine":
        res = subprocess.run(
            [sys.executable, "-m", "ascend_operator.cli.main", "render", "-f", str(EXAMPLE)],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return res.stdout
    sets = NETWORKPOLICY_SETS if target == "chart-networkpolicy" else []
    args = ["template", "ais", str(CHART), "--namespace=ascend-system", *(f"--set={s}" for s in sets)]
    return helm.run(*args)


@pytest.fixture(scope="module")
def all_findings(kube_score: Path, helm: Helm) -> list[Finding]:
    return [f for target in TARGETS for f in findings(target, score(kube_score, render(target, helm)))]


def test_every_finding_is_fixed_or_kept_with_a_reason(all_findings: list[Finding]) -> None:
    left = unexplained(all_findings, load_allowlist())
    assert not left, "kube-score findings without an allow-list entry:\n" + "\n".join(map(str, left))


def test_no_allow_list_entry_outlives_its_finding(all_findings: list[Finding]) -> None:
    gone = stale(all_findings, load_allowlist())
    assert not gone, f"allow-list entries that match no finding (remove them): {gone}"


def test_every_entry_has_a_reason_and_a_known_target() -> None:
    for entry in load_allowlist():
        assert len(entry.reason.split()) >= 10, entry
        assert set(entry.targets) <= set(TARGETS), entry


def test_what_the_issue_named_is_fixed(all_findings: list[Finding]) -> None:
    # engine CPU/memory/ephemeral requests and limits, the operator's readinessProbe (pod-probes), the
    # operator's NetworkPolicy once enabled; the engine's own NetworkPolicy leaves only the egress warning
    fixed = {
        ("engine", "container-resources"),
        ("engine", "container-ephemeral-storage-request-and-limit"),
        ("chart", "container-ephemeral-storage-request-and-limit"),
        ("chart", "pod-probes"),
        ("chart-networkpolicy", "pod-networkpolicy"),
    }
    assert not {(f.target, f.check) for f in all_findings} & fixed
    engine_policy = [f for f in all_findings if (f.target, f.check) == ("engine", "pod-networkpolicy")]
    assert [f.summaries for f in engine_policy] == [("The pod does not have a matching egress NetworkPolicy",)]


def test_matching_needs_check_object_and_target() -> None:
    entry = Allowed(check="pod-probes", targets=("engine",), kind="Pod", name="p-0", reason="r")
    hit = Finding(target="engine", kind="Pod", name="p-0", check="pod-probes", grade=7, summaries=())
    assert entry.matches(hit)
    assert not entry.matches(Finding(**{**hit.__dict__, "target": "chart"}))
    assert not entry.matches(Finding(**{**hit.__dict__, "name": "p-1"}))
    assert not entry.matches(Finding(**{**hit.__dict__, "check": "container-resources"}))
    assert unexplained([hit], [entry]) == []
    assert stale([], [entry]) == [entry]
