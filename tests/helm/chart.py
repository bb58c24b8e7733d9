"""Running Helm against the chart, for the tests: the binary, `helm template` parsed, `helm` with a kubeconfig.

Why it exists: the chart's behaviour is what Helm renders and installs, so the tests drive the real helm
binary (built from source by hack/build-k8s.sh, cached, like the control plane) instead of re-implementing
Go templates; every test reads the rendered objects through these few functions.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.cluster import build_tools

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ascend-inference-operator"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))


def find_helm() -> Path:
    """$AIS_HELM, else the helm hack/build-k8s.sh builds (a cached no-op once built; minutes when cold)."""
    given = os.environ.get("AIS_HELM")
    helm = Path(given) if given else build_tools("helm") / "helm"
    if not helm.exists():
        raise FileNotFoundError(f"no helm at {helm}")
    return helm


class HelmError(RuntimeError):
    """helm exited non-zero; carries stderr so tests can match Helm's message."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"helm {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.stderr = stderr


@dataclass(frozen=True)
class Helm:
    """The helm binary, optionally bound to a kubeconfig; helm's own state goes under `home`."""

    binary: Path
    home: Path
    kubeconfig: Path | None = None

    def run(self, *args: str, timeout: float = 180) -> str:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        kube = [f"--kubeconfig={self.kubeconfig}"] if self.kubeconfig else []
        res = subprocess.run(
            [str(self.binary), *args, *kube], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if res.returncode != 0:
            raise HelmError(args, res.returncode, res.stderr)
        return res.stdout

    def template(
        self,
        *values_files: Path,
        sets: Sequence[str] = (),
        release: str = "ais",
        namespace: str = "ascend-system",
    ) -> list[dict[str, Any]]:
        """`helm template` with these values files and --set flags, as parsed objects."""
        args = ["template", release, str(CHART), f"--namespace={namespace}"]
        args += [f"--values={f}" for f in values_files]
        args += [f"--set={s}" for s in sets]
        return parse_manifest(self.run(*args))

    def bound(self, kubeconfig: Path) -> Helm:
        return Helm(binary=self.binary, home=self.home, kubeconfig=kubeconfig)


def parse_manifest(text: str) -> list[dict[str, Any]]:
    """Objects of a multi-document YAML stream (empty documents dropped)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def pick(objects: Sequence[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """Objects of one kind (and name)."""
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: Sequence[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of a kind (and name); fails with what there was otherwise."""
    found = pick(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def operator_container(objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The operator container of the chart's Deployment."""
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["operator"]
    container: dict[str, Any] = containers[0]
    return container
