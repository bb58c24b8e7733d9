"""The product as the tests, the demo and perf/ start it: the operator and the simulator as subprocesses
(`python -m`, stopped by their PID), a service from the example, the spec.health that judges in seconds, and
one entry of the Ascend device plugin's fault list.

Why one module: the e2e fixtures (tests/e2e/operator_fixtures.py) and the on-demand experiments
(harness/plant.py for perf/soak.py and perf/volcano_gang.py) start the same processes the same way; two copies
had already drifted (one example() merged `engine`, the other replaced it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ascend_operator.contract.mindcluster import check_code
from harness.cluster import ROOT, Cluster

EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
#: `python -m` targets: the operator's CLI (aisctl) and the simulator's (aissim), two distributions.
AISCTL, AISSIM = "ascend_operator.cli.main", "aissim"
#: spec.health that judges in seconds (canary every 2 s, stall after 6 s, no cooldown between rolls).
FAST: dict[str, Any] = {
    "startupGraceSeconds": 600,
    "scrapeIntervalSeconds": 1,
    "canary": {"periodSeconds": 2, "timeoutSeconds": 5},
    "stall": {"windowSeconds": 6},
    "rolls": {"maxPerHour": 3, "cooldownSeconds": 0},
}


@dataclass
class Proc:
    """A product process started here (stopped by its PID, never by name)."""

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

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start(args: list[str], *, log: Path, env: dict[str, str] | None = None, program: str = AISCTL) -> Proc:
    """`python -m program args...`, its output appended to `log`."""
    out = log.open("ab")
    popen = subprocess.Popen(
        [sys.executable, "-m", program, *args],
        env={**os.environ, **(env or {})},
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    return Proc(popen=popen, log=log)


def liveness_port(port_base: int) -> int:
    """This process's own liveness port for an operator it starts (parallel sessions never share one)."""
    return port_base + os.getpid() % 1000


def start_operator(cluster: Cluster, log: Path, *extra: str, port_base: int = 18080) -> Proc:
    """`aisctl operator [extra...]` on `liveness_port(port_base)`, resyncing every 5 s."""
    url = f"http://127.0.0.1:{liveness_port(port_base)}/healthz"
    args = ["operator", *extra, "--liveness", url, "--resync-seconds", "5"]
    return start(args, log=log, env={"KUBECONFIG": str(cluster.kubeconfig)})


def example(name: str, *, node_label: str, **spec: Any) -> dict[str, Any]:
    """examples/dsv4-flash.yaml with another name, pinned to nodes carrying `ais-e2e=<node_label>`; spec
    keys given replace the example's, except `engine`, which is merged into the example's engine."""
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"]["name"] = name
    body["spec"]["scheduling"]["nodeSelector"] = {"ais-e2e": node_label}
    for key, value in spec.items():
        body["spec"][key] = {**body["spec"]["engine"], **value} if key == "engine" else value
    return body


def label_nodes(cluster: Cluster, names: list[str], value: str) -> None:
    """Label the nodes `ais-e2e=<value>` (what `example(node_label=value)` selects)."""
    for node in names:
        cluster.kubectl("label", "node", node, f"ais-e2e={value}", "--overwrite")


def chip_fault(chip: str, level: str, codes: str, *, age: float = 1.0) -> dict[str, Any]:
    """One entry of the plugin's `huawei.com/Ascend910-Fault` list, as the plugin writes it (the fields of
    ascend-device-plugin pkg/common/proto.go:222-236), its faults `age` seconds old."""
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


def write_plugin_report(
    cluster: Cluster, node: str, faults: list[dict[str, Any]], *, unhealthy: list[str] | None = None, free: str = ""
) -> None:
    """The device plugin's ConfigMap for `node` as the plugin writes it (ascend910.go:664-676; proto.go:36-42,
    222-236): kube-system/mindx-dl-deviceinfo-<node>, labelled mx-consumer-cim=true, its DeviceInfoCfg with the
    CheckCode the plugin computes; `unhealthy` the chips it lists Unhealthy (every faulty chip by default),
    `free` the healthy chips it still offers."""
    listed = [f["npu_name"] for f in faults] if unhealthy is None else unhealthy
    devices = {
        "huawei.com/Ascend910": free,
        "huawei.com/Ascend910-Fault": json.dumps(faults),
        "huawei.com/Ascend910-NetworkUnhealthy": "",
        "huawei.com/Ascend910-Recovering": "",
        "huawei.com/Ascend910-Unhealthy": ",".join(listed),
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
