"""ClusterD's processed view of the cluster's chips, nodes and switches, preferred to the raw reports. Pure.

Why: ClusterD (MindCluster's cluster daemon) reads every device plugin's and NodeD's report, adds what only
it knows (public faults sent to it, faults an administrator isolated by hand, faults it filtered or
merged), and writes the result for Volcano (component/clusterd/pkg/application/resource/report.go:132-
220, at Ascend/mind-cluster 22bb3d98). Where it runs, its view is what MindCluster acts on; where it does
not, this operator reads the plugin's and NodeD's own reports (contract/mindcluster.py). In the contract
beside them: which source MindCluster itself acts on is a fact about MindCluster, not this operator's
policy. The formats, all in namespace `mindx-dl` (ascend-common api.DLNamespace), labelled `mx-consumer-volcano=true`
(clusterd/pkg/common/constant/configmap.go:33-36), each ConfigMap's one data key its own name (report.go
updateConfig):
- `cluster-info-device-<i>` (configmap.go:23-24; split into chunks of at most 800 KiB, device/device_util.go
  18-21, 67-73): a JSON object `{"mindx-dl-deviceinfo-<node>": DeviceInfo}` (faultdomain/fault_utils.go
  262-268 keys it by CmName), DeviceInfo being `{"DeviceList": {...}, "UpdateTime": <s>, "CmName": ...,
  "SuperPodID": ..., "RackID": ..., "ServerIndex": ...}` (common/constant/type.go:61-67, 108-112): the
  plugin's DeviceList rebuilt from ClusterD's processed faults (fault_utils.go:284-325). No CheckCode: ClusterD
  checked the plugin's (device_util.go:35-37). An empty string when there is nothing to report.
- `cluster-info-node-cm` (configmap.go:25-26; report.go:157-167, one ConfigMap): `{"mindx-dl-nodeinfo-<node>":
  {"FaultDevList": [...], "NodeStatus": ..., "CmName": ..., "UpdateTime": ...}}` (type.go:40-50); only nodes
  NodeD reports faults of (NodeD deletes a healthy node's ConfigMap), "" when none.
- `cluster-info-switch-<i>` (configmap.go:27-28): `{"mindx-dl-switchinfo-<node>": {"FaultInfo": [...],
  "FaultLevel": ..., "UpdateTime": ..., "NodeStatus": "Healthy" | "SubHealthy" | "UnHealthy", ...}}`
  (type.go:69-82); Volcano takes a node whose switch says UnHealthy out whole (ascend-for-volcano
  internal/rescheduling/node.go:215-230).
"""

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ascend_operator.contract.mindcluster import (
    DEVICE_INFO_PREFIX,
    MANUALLY_SEPARATED,
    NODE_INFO_PREFIX,
    NodeReport,
    read_device_list,
)

CLUSTER_NAMESPACE = "mindx-dl"
CLUSTER_LABEL = "mx-consumer-volcano"
DEVICE_CM_PREFIX = "cluster-info-device-"
NODE_CM = "cluster-info-node-cm"
SWITCH_CM_PREFIX = "cluster-info-switch-"
#: The plugin's switch ConfigMap name prefix, by which ClusterD keys a node's switch entry (configmap.go:11-12).
SWITCH_INFO_PREFIX = "mindx-dl-switchinfo-"
SOURCE = "ClusterD (mindx-dl/cluster-info-device-*)"


@dataclass(frozen=True)
class ClusterView:
    """What ClusterD's ConfigMaps say, by node. `has_nodes`: cluster-info-node-cm exists (then a node it does
    not list is healthy by NodeD's account); `problems`: parts that did not parse, named."""

    devices: Mapping[str, NodeReport] = field(default_factory=dict)
    node_status: Mapping[str, str] = field(default_factory=dict)
    switch_status: Mapping[str, str] = field(default_factory=dict)
    has_nodes: bool = False
    problems: tuple[str, ...] = ()


def _entries(name: str, raw: str | None, problems: list[str]) -> dict[str, Mapping[str, object]]:
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        problems.append(f"{name}: not ClusterD's JSON object of per-node entries")
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, Mapping)}


def read_cluster_view(configmaps: Iterable[tuple[str, Mapping[str, str] | None]]) -> ClusterView:
    """ClusterD's ConfigMaps (name, data) in one view; ConfigMaps of other names are ignored."""
    devices: dict[str, NodeReport] = {}
    nodes: dict[str, str] = {}
    switches: dict[str, str] = {}
    problems: list[str] = []
    has_nodes = False
    for name, data in configmaps:
        raw = (data or {}).get(name)
        if name.startswith(DEVICE_CM_PREFIX):
            for key, entry in _entries(name, raw, problems).items():
                node = key.removeprefix(DEVICE_INFO_PREFIX)
                report = read_device_list(node, entry, where=f"{name}[{key}]")
                devices[node] = replace(report, source=SOURCE)
        elif name == NODE_CM:
            has_nodes = True
            for key, entry in _entries(name, raw, problems).items():
                status = entry.get("NodeStatus")
                nodes[key.removeprefix(NODE_INFO_PREFIX)] = status if isinstance(status, str) else "Healthy"
        elif name.startswith(SWITCH_CM_PREFIX):
            for key, entry in _entries(name, raw, problems).items():
                status = entry.get("NodeStatus")
                switches[key.removeprefix(SWITCH_INFO_PREFIX)] = status if isinstance(status, str) else "Healthy"
    return ClusterView(devices, nodes, switches, has_nodes, tuple(problems))


def preferred(own: NodeReport, view: ClusterView) -> NodeReport:
    """The node's report with ClusterD's view in place of the plugin's and NodeD's where ClusterD has one:
    its device entry for the node, its node status once it writes cluster-info-node-cm, its switch status.
    The chips an administrator separated in the plugin's ConfigMap (its ManuallySeparateNPU key, which
    ClusterD does not read: device/device_util.go:24-46 takes DeviceInfoCfg only) stay separated."""
    report = own
    if (device := view.devices.get(own.node)) is not None:
        have = {(f.chip, f.level) for f in device.faults}
        manual = tuple(f for f in own.faults if f.level == MANUALLY_SEPARATED and (f.chip, f.level) not in have)
        report = replace(
            device, faults=device.faults + manual, node_status=own.node_status,
            problems=own.problems + device.problems, chips_per_node=own.chips_per_node,
        )  # fmt: skip
    if view.has_nodes:
        report = replace(report, node_status=view.node_status.get(own.node, "Healthy"))
    return replace(report, switch_status=view.switch_status.get(own.node, "Healthy"))
