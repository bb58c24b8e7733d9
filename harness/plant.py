"""The product and the cluster's fault surfaces as the on-demand experiments drive them (perf/soak.py,
perf/volcano_gang.py): the operator and `aissim attach` as subprocesses, a service from the example, an
engine's /sim/faults, and the Ascend device plugin's report of a node.

Why here: perf/ may not import tests/ (tests/unit/test_layers.py), and the e2e helpers these mirror live in
tests/e2e/operator_fixtures.py and tests/e2e/test_npu_faults.py, which other work is changing. The forms are
the same: the device plugin's ConfigMap kube-system/mindx-dl-deviceinfo-<node>, labelled
mx-consumer-cim=true, its DeviceInfoCfg JSON with the CheckCode the plugin computes (health/chips.py
`check_code` cites its Go), the plugin's `huawei.com/AscendReal` annotation of the chips it mounted, and the
node's allocatable NPUs one down while a chip is Unhealthy.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from ascend_operator.contract.mindcluster import check_code
from harness.cluster import ROOT, Cluster

CRD = ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
CRD_NAME = "ascendinferenceservices.inference.ascend.dev"
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
#: `python -m` targets: the operator's CLI (aisctl) and the simulator's (aissim).
AISCTL, AISSIM = "ascend_operator.cli.main", "aissim"
#: spec.health that judges in seconds (tests/e2e/operator_fixtures.py FAST).
FAST: dict[str, Any] = {
    "startupGraceSeconds": 600,
    "scrapeIntervalSeconds": 1,
    "canary": {"periodSeconds": 2, "timeoutSeconds": 5},
    "stall": {"windowSeconds": 6},
    "rolls": {"maxPerHour": 3, "cooldownSeconds": 0},
}
CHIPS = ",".join(f"Ascend910-{i}" for i in range(8))


@dataclass
class Proc:
    """A product process this experiment started (stopped by its PID)."""

    popen: subprocess.Popen[bytes]
    log: Path

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def start(args: list[str], *, log: Path, env: dict[str, str] | None = None, program: str = AISCTL) -> Proc:
    out = log.open("ab")
    popen = subprocess.Popen(
        [sys.executable, "-m", program, *args], env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
    )
    return Proc(popen=popen, log=log)


def liveness_port(port_base: int) -> int:
    return port_base + os.getpid() % 1000


def start_operator(cluster: Cluster, log: Path, *extra: str, port_base: int) -> Proc:
    """`aisctl operator [extra...]`, resyncing every 5 s, its liveness on `liveness_port(port_base)`."""
    url = f"http://127.0.0.1:{liveness_port(port_base)}/healthz"
    args = ["operator", *extra, "--liveness", url, "--resync-seconds", "5"]
    return start(args, log=log, env={"KUBECONFIG": str(cluster.kubeconfig)})


def example(name: str, *, node_label: str, **spec: Any) -> dict[str, Any]:
    """examples/dsv4-flash.yaml named `name`, on nodes labelled `ais-e2e=<node_label>`, `spec` keys replaced."""
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"]["name"] = name
    body["spec"]["scheduling"]["nodeSelector"] = {"ais-e2e": node_label}
    body["spec"].update(spec)
    return body


def label_nodes(cluster: Cluster, names: list[str], value: str) -> None:
    for node in names:
        cluster.kubectl("label", "node", node, f"ais-e2e={value}", "--overwrite")


def sim(base: str, method: str, body: dict[str, Any] | None = None) -> None:
    """Set (POST) or clear (DELETE) an engine's simulated faults; raises on an error status."""

    async def go() -> None:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.request(method, base + "/sim/faults", json=body) as resp,
        ):
            resp.raise_for_status()

    asyncio.run(go())


def chip_fault(chip: str, level: str, codes: str, *, age: float = 1.0) -> dict[str, Any]:
    """One entry of the plugin's `huawei.com/Ascend910-Fault` list."""
    at = int((time.time() - age) * 1000)
    return {
        "fault_type": "CardUnhealthy",
        "npu_name": chip,
        "large_model_fault_level": level,
        "fault_level": level,
        "fault_handling": level,
        "fault_code": codes,
        "fault_time_and_level_map": {c: {"fault_time": at, "fault_level": level} for c in codes.split(",")},
    }


def plugin_report(cluster: Cluster, node: str, faults: list[dict[str, Any]]) -> None:
    """The device plugin's report of `node` with `faults`, every faulty chip Unhealthy (no Volcano here)."""
    devices = {
        "huawei.com/Ascend910": "",
        "huawei.com/Ascend910-Fault": json.dumps(faults),
        "huawei.com/Ascend910-NetworkUnhealthy": "",
        "huawei.com/Ascend910-Recovering": "",
        "huawei.com/Ascend910-Unhealthy": ",".join(f["npu_name"] for f in faults),
    }
    device_info = {"DeviceList": devices, "UpdateTime": int(time.time())}
    info = {"DeviceInfo": device_info, "SuperPodID": -2, "CheckCode": check_code(device_info)}
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"mindx-dl-deviceinfo-{node}", "labels": {"mx-consumer-cim": "true"}},
        "data": {"DeviceInfoCfg": json.dumps(info)},
    }
    cluster.apply(body, namespace="kube-system")


def mount_chips(cluster: Cluster, namespace: str, pod: str) -> None:
    """The plugin's annotation of the chips it mounted into the pod (all 8)."""
    cluster.kubectl("annotate", "pod", pod, "-n", namespace, f"huawei.com/AscendReal={CHIPS}", "--overwrite")


def set_allocatable(cluster: Cluster, node: str, npus: int) -> None:
    """The node's allocatable NPUs as the kubelet reports them after the plugin's health report."""
    patch = {"status": {"allocatable": {"huawei.com/Ascend910": str(npus)}}}
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(patch))
