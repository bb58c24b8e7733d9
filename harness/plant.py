"""The product and the cluster's fault surfaces as the on-demand experiments drive them (perf/soak.py,
perf/volcano_gang.py): the operator and `aissim attach` as subprocesses, a service from the example, an
engine's /sim/faults, and the Ascend device plugin's report of a node.

Why here: perf/ may not import tests/ (tests/unit/test_layers.py); the processes, the example and the fault
entry come from harness/product.py, which the e2e fixtures use too. The forms are those of the e2e tests:
the device plugin's ConfigMap kube-system/mindx-dl-deviceinfo-<node>, labelled mx-consumer-cim=true, its
DeviceInfoCfg JSON with the CheckCode the plugin computes (contract/mindcluster.py `check_code` cites its
Go), the plugin's `huawei.com/AscendReal` annotation of the chips it mounted, and the node's allocatable
NPUs one down while a chip is Unhealthy.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from harness.cluster import ROOT, Cluster
from harness.product import AISCTL as AISCTL
from harness.product import AISSIM as AISSIM
from harness.product import FAST as FAST
from harness.product import Proc as Proc
from harness.product import chip_fault as chip_fault
from harness.product import example as example
from harness.product import label_nodes as label_nodes
from harness.product import liveness_port as liveness_port
from harness.product import start as start
from harness.product import start_operator as start_operator
from harness.product import write_plugin_report

CRD = ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml"
CRD_NAME = "ascendinferenceservices.inference.ascend.dev"
CHIPS = ",".join(f"Ascend910-{i}" for i in range(8))


def sim(base: str, method: str, body: dict[str, Any] | None = None) -> None:
    """Set (POST) or clear (DELETE) an engine's simulated faults; raises on an error status."""

    async def go() -> None:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.request(method, base + "/sim/faults", json=body) as resp,
        ):
            resp.raise_for_status()

    asyncio.run(go())


def plugin_report(cluster: Cluster, node: str, faults: list[dict[str, Any]]) -> None:
    """The device plugin's report of `node` with `faults`, every faulty chip Unhealthy (no Volcano here)."""
    write_plugin_report(cluster, node, faults)


def mount_chips(cluster: Cluster, namespace: str, pod: str) -> None:
    """The plugin's annotation of the chips it mounted into the pod (all 8)."""
    cluster.kubectl("annotate", "pod", pod, "-n", namespace, f"huawei.com/AscendReal={CHIPS}", "--overwrite")


def set_allocatable(cluster: Cluster, node: str, npus: int) -> None:
    """The node's allocatable NPUs as the kubelet reports them after the plugin's health report."""
    patch = {"status": {"allocatable": {"huawei.com/Ascend910": str(npus)}}}
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(patch))
