"""MindCluster's NPU reports as its device plugin and NodeD write them: the formats, and parsing them. Pure.

Why in the contract: these are facts about another program's output (Ascend/mind-cluster at 22bb3d98,
unchanged since v7.3.2; paths under component/), like vLLM's flags and metrics, read by the operator's
client (clients/chip_reports.py), its policy (health/chips.py: which pods hold a chip MindCluster acts on)
and the test fixtures the plugin's own Go code generates (hack/mindcluster-fixtures), so no layer takes
another's policy module to learn a ConfigMap's name.

- ConfigMap `kube-system/mindx-dl-deviceinfo-<node>` (ascend-device-plugin/pkg/common/constants.go:70,
  label `mx-consumer-cim=true`: ascend-common/api/consts.go:109), data key `DeviceInfoCfg`
  (consts.go:100): `{"DeviceInfo": {"DeviceList": {...}, "UpdateTime": <s>}, ...}` (pkg/common/proto.go
  36-42, 80-83). DeviceList (device/ascend910.go:664-676): `huawei.com/Ascend910` lists the FREE healthy
  chips only (an empty list is not a fault); `-Unhealthy`, `-NetworkUnhealthy`, `-Recovering` are
  comma-joined chip names; `-Fault` is a JSON string of fault entries (proto.go:222-236: fault_type
  CardUnhealthy | CardNetworkUnhealthy, npu_name, fault_level, fault_handling, fault_code "80E18402,...",
  fault_time_and_level_map {code: {fault_time: <ms>, fault_level}}), "[]" when healthy.
- ConfigMap `mindx-dl/mindx-dl-nodeinfo-<node>` (noded/pkg/common/constants.go:24; consts.go:30), data
  key `NodeInfo` (consts.go:104): `{"NodeInfo": {"FaultDevList": [...], "NodeStatus": "Healthy" |
  "PreSeparate" | "UnHealthy"}, "CheckCode": ...}` (noded/pkg/common/type.go:50-79). NodeD deletes it when
  the node is healthy (noded/pkg/reporter/cmreporter/configmap_reporter.go:68-73): absent means healthy.
- The chips a pod holds: its annotation `huawei.com/AscendReal` (ascend-common/api/default_name.go:18,
  written by device/ascendcommon.go:989-1003), e.g. "Ascend910-0,Ascend910-1".

Fault levels, most serious first (pkg/common/fault_code.go:36-60, precedence 1336-1358): `LEVELS`; what
the operator does with each is health/chips.py's.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

DEVICE_INFO_NAMESPACE = "kube-system"
DEVICE_INFO_PREFIX = "mindx-dl-deviceinfo-"
DEVICE_INFO_KEY = "DeviceInfoCfg"
NODE_INFO_NAMESPACE = "mindx-dl"
NODE_INFO_PREFIX = "mindx-dl-nodeinfo-"
NODE_INFO_KEY = "NodeInfo"
CONSUMER_LABEL = "mx-consumer-cim"
ANNOTATION_CHIPS = "huawei.com/AscendReal"
CHIP_RESOURCE = "huawei.com/Ascend910"
FAULT_KEY = f"{CHIP_RESOURCE}-Fault"
UNHEALTHY_KEY = f"{CHIP_RESOURCE}-Unhealthy"
#: The DeviceList keys' prefix on chips whose plugin names them `huawei.com/npu` (common/device.go:513-519
#: GetAscend910Key; the Atlas A5 name, ascend910.go:78-83); chip names follow suit.
NPU_RESOURCE_PREFIX = "huawei.com/npu"
#: A data key beside DeviceInfoCfg (pkg/common/constants.go:71-72; written by kubeclient/client_server.go
#: 199-226): comma-joined chips separated by a ManuallySeparateNPU fault, which stay separated until an
#: administrator removes them from this key, whatever the fault list says since (device/ascendcommon.go
#: 224-272).
MANUALLY_SEPARATED_KEY = "ManuallySeparateNPU"
MANUALLY_SEPARATED = "ManuallySeparateNPU"

#: MindCluster's levels, most serious first (fault_code.go getMostSeriousFaultType).
LEVELS = (
    "ManuallySeparateNPU",
    "SeparateNPU",
    "PreSeparateNPU",
    "RestartNPU",
    "FreeRestartNPU",
    "RestartBusiness",
    "RestartRequest",
    "SubHealthFault",
    "NotHandleFault",
)
#: The level of a chip with no fault code left (GetFaultTypeByCode, pkg/common/fault_code.go:1171-1174;
#: NormalNetwork for its network, :1107): the plugin still writes a `-Fault` entry for a chip it holds
#: Unhealthy without a code (device/ascendcommon.go:777-787), as during a hot reset. Read, never acted on.
NORMAL = ("NormalNPU", "NormalNetwork")
#: The level MindCluster acts on only once it has lasted a while (health/chips.py RESTART_REQUEST_SECONDS).
RESTART_REQUEST = "RestartRequest"
NETWORK = "CardNetworkUnhealthy"
#: NodeD's status of a node that must not run workloads.
NODE_UNHEALTHY = "UnHealthy"
#: NodeD's status of a sub-healthy node (noded/pkg/common/constants.go:86-87, control/faultcontrol/fault.go
#: 181-193): its pods run on, but MindCluster's scheduler places nothing new there (ascend-for-volcano
#: internal/rescheduling/reschedule.go:860-863 refuses a node whose NodeD status is PreSeparate).
NODE_PRESEPARATE = "PreSeparate"


@dataclass(frozen=True)
class ChipFault:
    """One chip's fault as the plugin reports it."""

    chip: str
    level: str
    codes: tuple[str, ...]
    network: bool
    since: float | None
    """Epoch seconds of the earliest fault time at this level (the plugin's own clock), None if not given."""


@dataclass(frozen=True)
class NodeReport:
    """What the plugin and NodeD say of one node. `problems` are malformed parts, named."""

    node: str
    faults: tuple[ChipFault, ...] = ()
    unhealthy: frozenset[str] = frozenset()
    node_status: str = "Healthy"
    problems: tuple[str, ...] = ()
    updated: float | None = None
    """DeviceInfo.UpdateTime: epoch seconds of the plugin's last write by the node's clock, None if not given."""
    seen: float | None = None
    """This operator's clock when it saw the plugin's report change (clients/chip_reports.py), None when it
    has no report: what staleness is judged by."""
    chips_per_node: int | None = None
    """The node's NPUs as its capacity lists them (the plugin registers every chip, healthy or not), None
    when unknown: the "more than half faulty" rule then waits for it."""
    switch_status: str = "Healthy"
    """The node's switch status as ClusterD passes it on (contract/clusterd.py); UnHealthy takes the node out."""
    source: str = "the Ascend device plugin"
    """Who this operator read the chips from: the plugin's own ConfigMap, or ClusterD's processed view."""


def _fault(entry: Mapping[str, object]) -> ChipFault | None:
    chip, level = entry.get("npu_name"), entry.get("fault_handling") or entry.get("fault_level")
    if not isinstance(chip, str) or not isinstance(level, str) or level not in (*LEVELS, *NORMAL):
        return None
    codes = tuple(c for c in str(entry.get("fault_code") or "").split(",") if c)
    times = entry.get("fault_time_and_level_map")
    at = [
        float(t["fault_time"]) / 1000.0
        for t in (times.values() if isinstance(times, Mapping) else ())
        if isinstance(t, Mapping) and t.get("fault_level") == level and isinstance(t.get("fault_time"), int | float)
    ]
    network = entry.get("fault_type") == NETWORK
    return ChipFault(chip=chip, level=level, codes=codes, network=network, since=min(at, default=None))


#: What Go's encoding/json escapes in strings and Python's json.dumps does not (encode.go: HTMLEscape, and
#: U+2028/U+2029 always).
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def check_code(value: object) -> str:
    """MindCluster's MakeDataHash (ascend-device-plugin pkg/common/common.go:135-147; NodeD's
    configmap_reporter.go:65): SHA-256 of Go's json.Marshal of the report's DeviceInfo / NodeInfo. Re-encoded
    compactly in the order the writer (Go: struct fields in order, map keys sorted) gave; it reproduces the
    CheckCode of the device plugin's example in the MindCluster docs (tests/fixtures/mindcluster)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES:
        text = text.replace(char, escaped)
    return hashlib.sha256(text.encode()).hexdigest()


def _altered(doc: Mapping[str, object], part: str) -> str | None:
    """A problem when `doc`'s CheckCode is not its `part`'s hash: MindCluster's ClusterD refuses such a report
    (clusterd pkg/domain/device/device_util.go:35-37, node/node_util.go:40-42), and so does this operator."""
    code = doc.get("CheckCode")
    if isinstance(code, str) and code == check_code(doc.get(part)):
        return None
    return f"CheckCode does not match {part} (the report was altered or truncated): not acted on"


def parse_device_info(node: str, data: Mapping[str, str] | None) -> NodeReport:
    """The plugin's ConfigMap data for `node`; a part that does not parse is a named problem, never an error."""
    raw = (data or {}).get(DEVICE_INFO_KEY)
    if raw is None:
        return NodeReport(node=node)
    try:
        doc = json.loads(raw)
        devices = doc["DeviceInfo"]["DeviceList"]
    except (ValueError, KeyError, TypeError):
        devices = None
    if not isinstance(devices, dict):
        return NodeReport(node=node, problems=(f"{DEVICE_INFO_KEY}: not the plugin's DeviceInfo JSON",))
    if (altered := _altered(doc, "DeviceInfo")) is not None:
        return NodeReport(node=node, problems=(f"{DEVICE_INFO_KEY}.{altered}",))
    return read_device_list(node, doc["DeviceInfo"], manually=(data or {}).get(MANUALLY_SEPARATED_KEY))


def read_device_list(
    node: str, device_info: Mapping[str, object], *, manually: str | None = None, where: str = DEVICE_INFO_KEY
) -> NodeReport:
    """A DeviceInfo ({"DeviceList": ..., "UpdateTime": ...}) as the plugin wrote it or ClusterD passed it on,
    `manually` the chips an administrator has yet to release; `where` names it in problems."""
    devices = device_info.get("DeviceList")
    devices = devices if isinstance(devices, Mapping) else {}
    stamp = device_info.get("UpdateTime")
    updated = float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None
    prefix = next((p for p in (CHIP_RESOURCE, NPU_RESOURCE_PREFIX) if f"{p}-Fault" in devices), None)
    if prefix is None:
        if renamed := sorted(str(k).removesuffix("-Fault") for k in devices if str(k).endswith("-Fault")):
            # deviceNameCustomization.json renames every key and chip (next/devicefactory/customname/
            # public_name_config.go:30, 204-230): faults under a name this operator does not know are unknown
            problem = (
                f"{where}.DeviceList: resource name {', '.join(renamed)} (renamed by the plugin's "
                f"deviceNameCustomization.json) is not {CHIP_RESOURCE} or {NPU_RESOURCE_PREFIX}: its chips' "
                "faults are unknown to this operator, not read as none"
            )
            return NodeReport(node=node, problems=(problem,), updated=updated)
        prefix = CHIP_RESOURCE
    fault_key, unhealthy_key = f"{prefix}-Fault", f"{prefix}-Unhealthy"
    problems: list[str] = []
    entries: list[object] = []
    try:
        parsed = json.loads(str(devices.get(fault_key) or "[]"))
        entries = parsed if isinstance(parsed, list) else []
    except ValueError:
        problems.append(f"{where}.DeviceList[{fault_key}]: not a JSON list")
    faults = [f for e in entries if isinstance(e, Mapping) and (f := _fault(e)) is not None]
    if len(faults) < len(entries):
        problems.append(f"{where}.DeviceList[{fault_key}]: {len(entries) - len(faults)} entries unread")
    faults += _manually_separated(manually, already={f.chip for f in faults if f.level == MANUALLY_SEPARATED})
    unhealthy = frozenset(c for c in str(devices.get(unhealthy_key) or "").split(",") if c)
    return NodeReport(node=node, faults=tuple(faults), unhealthy=unhealthy, problems=tuple(problems), updated=updated)


def _manually_separated(manually: str | None, *, already: set[str]) -> list[ChipFault]:
    """The chips an administrator has yet to release (the ManuallySeparateNPU key), as faults at that level."""
    listed = [c.strip() for c in str(manually or "").split(",") if c.strip()]
    return [
        ChipFault(chip=chip, level=MANUALLY_SEPARATED, codes=(), network=False, since=None)
        for chip in dict.fromkeys(listed)
        if chip not in already
    ]


def parse_node_info(data: Mapping[str, str] | None) -> tuple[str, str | None]:
    """NodeD's node status ("Healthy" when it wrote nothing) and a problem, if its data did not parse."""
    raw = (data or {}).get(NODE_INFO_KEY)
    if raw is None:
        return "Healthy", None
    try:
        doc = json.loads(raw)
        status = doc["NodeInfo"]["NodeStatus"]
    except (ValueError, KeyError, TypeError):
        return "Healthy", f"{NODE_INFO_KEY}: not NodeD's NodeInfo JSON"
    if (altered := _altered(doc, "NodeInfo")) is not None:
        return "Healthy", f"{NODE_INFO_KEY}.{altered}"
    return (status, None) if isinstance(status, str) else ("Healthy", f"{NODE_INFO_KEY}.NodeStatus: not a string")


def pod_chips(annotations: Mapping[str, str] | None) -> frozenset[str]:
    """The chips the plugin mounted into a pod (empty until it annotated the pod)."""
    return frozenset(c.strip() for c in (annotations or {}).get(ANNOTATION_CHIPS, "").split(",") if c.strip())


def node_report(node: str, device_info: Mapping[str, str] | None, node_info: Mapping[str, str] | None) -> NodeReport:
    """Both reports of one node in one record (either ConfigMap may be absent: absent is healthy)."""
    report = parse_device_info(node, device_info)
    status, problem = parse_node_info(node_info)
    problems = report.problems + ((problem,) if problem else ())
    return replace(report, node_status=status, problems=problems)
