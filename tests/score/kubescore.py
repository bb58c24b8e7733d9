"""Running kube-score on rendered objects and matching its findings against the allow-list.

Why it exists: a third-party scorer catches what our own tests would not think to ask (probes, resources,
security context, NetworkPolicy coverage). Every finding is either fixed or kept with a written reason
in allowlist.yaml; these helpers turn kube-score's JSON (output version v2) into findings and do the
matching, so the test reads as "no finding without a reason, no reason without a finding".
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.cluster import build_tools

ALLOWLIST = Path(__file__).resolve().parent / "allowlist.yaml"
#: The Kubernetes version the manifests target (the control plane the tests run on).
KUBERNETES_VERSION = "v1.37"
#: kube-score's grade for a check that passed (GradeAllOK).
GRADE_OK = 10


@dataclass(frozen=True)
class Finding:
    """One check that did not pass on one object."""

    target: str
    kind: str
    name: str
    check: str
    grade: int
    summaries: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.target}: {self.kind}/{self.name}: {self.check} (grade {self.grade}): {'; '.join(self.summaries)}"


@dataclass(frozen=True)
class Allowed:
    """One allow-list entry."""

    check: str
    targets: tuple[str, ...]
    kind: str
    name: str
    reason: str

    def matches(self, finding: Finding) -> bool:
        return (finding.check, finding.kind, finding.name) == (self.check, self.kind, self.name) and (
            finding.target in self.targets
        )


def find_kube_score() -> Path:
    """$AIS_KUBE_SCORE, else the kube-score hack/build-k8s.sh builds (cached)."""
    given = os.environ.get("AIS_KUBE_SCORE")
    binary = Path(given) if given else build_tools("kube-score") / "kube-score"
    if not binary.exists():
        raise FileNotFoundError(f"no kube-score at {binary}")
    return binary


def score(binary: Path, manifest: str) -> list[dict[str, Any]]:
    """kube-score's v2 JSON for a multi-document manifest (it exits 1 when anything is critical)."""
    res = subprocess.run(
        [str(binary), "score", "--kubernetes-version", KUBERNETES_VERSION, "-o", "json", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if res.returncode not in (0, 1) or not res.stdout.strip():
        raise RuntimeError(f"kube-score exited {res.returncode}: {res.stderr}")
    objects: list[dict[str, Any]] = json.loads(res.stdout)
    return objects


def findings(target: str, scored: list[dict[str, Any]]) -> list[Finding]:
    """Every check below the top grade and not skipped."""
    out = []
    for obj in scored:
        for check in obj.get("checks") or []:
            if check["skipped"] or check["grade"] >= GRADE_OK:
                continue
            out.append(
                Finding(
                    target=target,
                    kind=obj["type_meta"]["kind"],
                    name=obj["object_meta"]["name"],
                    check=check["check"]["id"],
                    grade=int(check["grade"]),
                    summaries=tuple(c["summary"] for c in check.get("comments") or []),
                )
            )
    return out


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowed]:
    """The allow-list entries."""
    return [
        Allowed(
            check=e["check"], targets=tuple(e["targets"]), kind=e["kind"], name=e["name"], reason=e.get("reason", "")
        )
        for e in yaml.safe_load(path.read_text()) or []
    ]


def unexplained(found: list[Finding], allowed: list[Allowed]) -> list[Finding]:
    """Findings no entry allows."""
    return [f for f in found if not any(a.matches(f) for a in allowed)]


def stale(found: list[Finding], allowed: list[Allowed]) -> list[Allowed]:
    """Entries that allow nothing any more."""
    return [a for a in allowed if not any(a.matches(f) for f in found)]
