"""MindCluster's NPU reports, read into typed records. Pure: no I/O, no clock; a malformed part is a named
`FormatProblem` (so the operator can emit an event), never an exception.

Why its own module: the formats are MindCluster's, not ours, and change with its releases; health/npu.py
judges the records and never touches a raw string. Every format below was read in Ascend/mind-cluster at
commit 22bb3d987bc0208c3eb7395e222b661276133c58 (paths under component/ unless they start with docs/):

- The device plugin's ConfigMap `kube-system/mindx-dl-deviceinfo-<node>`: name prefix
  ascend-device-plugin/pkg/common/constants.go:70, label `mx-consumer-cim=true` (ascend-common/api/consts.go:109,
  set in ascend-device-plugin/pkg/kubeclient/client_server.go:205), data keys `DeviceInfoCfg`
  (ascend-common/api/consts.go:100) and `ManuallySeparateNPU` (pkg/common/constants.go:72; comma-joined chip
  names the plugin separated after repeated faults, docs/en/scheduling/api/ascend_device_plugin.md:63), written
  by client_server.go:191-234. `DeviceInfoCfg` is `NodeDeviceInfoCache` (pkg/common/proto.go:36-42:
  DeviceInfo, SuperPodID, ServerIndex, CheckCode, RackID) whose DeviceInfo is `NodeDeviceInfo`
  (proto.go:80-83: DeviceList map[string]string, UpdateTime in seconds). CheckCode is the SHA-256 of DeviceInfo
  as Go marshals it (client_server.go:193, pkg/common/common.go:135-147): checked here, a mismatch is a problem.
- DeviceList keys (pkg/device/ascend910.go:664-676): `<resource>` the FREE healthy chips only (an empty list is
  not a fault), `<resource>-Unhealthy`, `-NetworkUnhealthy`, `-Recovering` comma-joined chip names
  (suffixes ascend-common/api/consts.go:246-253), `<resource>-Fault` a JSON STRING of the fault list, "[]" when
  healthy (built with make() in pkg/device/ascendcommon.go:647, so never "null"). `<resource>` is
  `huawei.com/Ascend910`, or `huawei.com/npu` on Ascend910A5 (pkg/common/device.go:514-519) and under public
  names (pkg/next/devicefactory/customname/public_name_config.go:205-215): read by suffix, not by a fixed key.
- A fault entry (proto.go:227-236, built in pkg/device/ascendcommon.go:778-815): one per chip and fault_type
  (`CardUnhealthy` | `CardNetworkUnhealthy`, pkg/common/fault_code.go:57-60), npu_name e.g. "Ascend910-4",
  large_model_fault_level = fault_level = fault_handling (the same value, ascendcommon.go:809-811; the docs
  recommend fault_handling, docs/en/scheduling/api/ascend_device_plugin.md:24), fault_code "80E18402,..."
  (upper-case hex), fault_time_and_level_map {code: {fault_time: <ms>, fault_level}} (proto.go:222-225).
  Levels: fault_code.go:36-60 and :98 (SubHealthFault); NormalNPU / NormalNetwork mean no fault.
  The docs also name a node fault entry (fault_type NodeUnhealthy, empty npu_name and level,
  ascend_device_plugin.md:22-24); the plugin source writes none, it is kept as a node entry if it comes.
- NodeD's ConfigMap `mindx-dl/mindx-dl-nodeinfo-<node>` (noded/pkg/common/constants.go:24,
  ascend-common/api/consts.go:30), data key `NodeInfo` (consts.go:104): `NodeInfoCM` (noded/pkg/common/type.go
  76-79) = {"NodeInfo": {"FaultDevList": [{DeviceType, DeviceId, FaultCode: [...], FaultLevel}], "NodeStatus":
  Healthy | PreSeparate | UnHealthy}, "CheckCode"} (type.go:50-61, constants.go:84-89). NodeD deletes it when the
  node has no fault and is Healthy (noded/pkg/reporter/cmreporter/configmap_reporter.go:68-73): absent = healthy.
  Docs example: docs/en/scheduling/references/common_operations.md:493.
- The chips a pod holds (pkg/device/ascendcommon.go:987-1035, every 5 s): `huawei.com/AscendReal` the chips
  actually mounted, e.g. "Ascend910-0,Ascend910-1" (ascend-common/api/default_name.go:18); the configuration
  `ascend.kubectl.kubernetes.io/ascend-910-configuration` (default_name.go:9; `-npu-configuration` on npu,
  :11) JSON with devices[].device_id, the physical id (pkg/common/proto.go:134-151, common.go:503-545), from the
  same real device list; under Volcano the pod's `huawei.com/Ascend910` (Volcano's choice); `huawei.com/kltDev`
  (constants.go:98) what the kubelet allocated, which Volcano may override. Read in that order.
"""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from ascend_operator.api.constants import NPU_RESOURCE

DEVICE_INFO_NAMESPACE = "kube-system"
DEVICE_INFO_PREFIX = "mindx-dl-deviceinfo-"
DEVICE_INFO_KEY = "DeviceInfoCfg"
MANUALLY_SEPARATED_KEY = "ManuallySeparateNPU"
NODE_INFO_NAMESPACE = "mindx-dl"
NODE_INFO_PREFIX = "mindx-dl-nodeinfo-"
NODE_INFO_KEY = "NodeInfo"
CONSUMER_LABEL = "mx-consumer-cim"
ANNOTATION_REAL = "huawei.com/AscendReal"
ANNOTATION_KUBELET = "huawei.com/kltDev"
ANNOTATION_CONFIGURATIONS = (
    "ascend.kubectl.kubernetes.io/ascend-910-configuration",
    "ascend.kubectl.kubernetes.io/ascend-npu-configuration",
)
FAULT_SUFFIX = "-Fault"
UNHEALTHY_SUFFIX = "-Unhealthy"
NETWORK_UNHEALTHY_SUFFIX = "-NetworkUnhealthy"
RECOVERING_SUFFIX = "-Recovering"
#: A MindCluster level that means "no fault" (fault_code.go:49-52).
NORMAL = frozenset({"NormalNPU", "NormalNetwork"})


class Level(StrEnum):
    """MindCluster's fault handling levels (fault_code.go:36-60, :98)."""

    MANUALLY_SEPARATE = "ManuallySeparateNPU"
    SEPARATE = "SeparateNPU"
    PRE_SEPARATE = "PreSeparateNPU"
    RESTART_NPU = "RestartNPU"
    FREE_RESTART_NPU = "FreeRestartNPU"
    RESTART_BUSINESS = "RestartBusiness"
    RESTART_REQUEST = "RestartRequest"
    SUB_HEALTH = "SubHealthFault"
    NOT_HANDLE = "NotHandleFault"


#: Most serious first: getMostSeriousFaultType's order (fault_code.go:1336-1358).
SEVERITY: tuple[Level, ...] = tuple(Level)


class FaultType(StrEnum):
    """Which part of the chip failed (fault_code.go:57-60)."""

    CARD = "CardUnhealthy"
    NETWORK = "CardNetworkUnhealthy"


class NodeStatus(StrEnum):
    """NodeD's node status (noded/pkg/common/constants.go:84-89)."""

    HEALTHY = "Healthy"
    PRE_SEPARATE = "PreSeparate"
    UNHEALTHY = "UnHealthy"


@dataclass(frozen=True)
class FormatProblem:
    """A part of a report that did not read: where (the object), which field, and what was wrong."""

    source: str
    field: str
    detail: str

    @property
    def message(self) -> str:
        return f"{self.source}: {self.field}: {self.detail}"


@dataclass(frozen=True)
class ChipFault:
    """One fault entry of the plugin: a chip, its card or network fault, the level and the codes."""

    chip: str
    level: Level
    fault_type: FaultType
    codes: tuple[str, ...]
    since: float | None = None
    """Epoch seconds of the earliest fault_time among the codes (the plugin's clock), None if none given."""

    @property
    def network(self) -> bool:
        return self.fault_type is FaultType.NETWORK


@dataclass(frozen=True)
class NodeChips:
    """The device plugin's report of one node. `reported` is False when it wrote no DeviceInfoCfg."""

    node: str
    reported: bool = False
    updated: float | None = None
    faults: tuple[ChipFault, ...] = ()
    free: frozenset[str] = frozenset()
    unhealthy: frozenset[str] = frozenset()
    network_unhealthy: frozenset[str] = frozenset()
    recovering: frozenset[str] = frozenset()
    manually_separated: frozenset[str] = frozenset()
    node_entries: tuple[str, ...] = ()
    """Fault entries with no npu_name (the docs' node fault): "<fault_type> (<codes>)", reported only."""
    problems: tuple[FormatProblem, ...] = ()


@dataclass(frozen=True)
class NodeInfo:
    """NodeD's report of one node; `status` is Healthy when NodeD wrote nothing (it deletes a healthy one)."""

    node: str
    status: NodeStatus = NodeStatus.HEALTHY
    faulty_devices: tuple[str, ...] = ()
    """"<DeviceType> <DeviceId>: <FaultLevel> (<codes>)" per FaultDevList entry."""
    problems: tuple[FormatProblem, ...] = ()


@dataclass(frozen=True)
class PodChips:
    """The chips a pod holds and the annotation they were read from ("" when none said)."""

    chips: frozenset[str] = frozenset()
    source: str = ""
    problems: tuple[FormatProblem, ...] = ()


def _names(value: str) -> frozenset[str]:
    return frozenset(n.strip() for n in value.split(",") if n.strip())


def _go_json(value: object) -> str:
    """What Go's json.Marshal writes for `value` (maps sorted, no spaces, HTML characters escaped)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _load(raw: str) -> tuple[object, str]:
    """The JSON value of `raw`, or None and why not (a data value is any string: never raise on it)."""
    try:
        return json.loads(raw), ""
    except json.JSONDecodeError as err:
        return None, f"not JSON ({err.msg} at character {err.pos})"
    except (ValueError, RecursionError) as err:
        return None, f"not JSON ({type(err).__name__})"


def _level(entry: Mapping[str, object]) -> object:
    for key in ("fault_handling", "fault_level", "large_model_fault_level"):
        if entry.get(key):
            return entry[key]
    return ""


def _since(times: object) -> float | None:
    if not isinstance(times, Mapping):
        return None
    at = [t["fault_time"] for t in times.values() if isinstance(t, Mapping) and isinstance(t.get("fault_time"), int)]
    return min(at) / 1000.0 if at else None


def _entry(entry: object, node_entries: list[str]) -> ChipFault | str | None:
    """One fault entry: the fault, a problem's detail (str), or None for a "Normal" level / a node entry."""
    if not isinstance(entry, Mapping):
        return f"entry is {type(entry).__name__}, not an object"
    chip, kind, level, codes = entry.get("npu_name"), entry.get("fault_type"), _level(entry), entry.get("fault_code")
    if not isinstance(codes, str) and codes is not None:
        return f"fault_code of {chip!r} is not a string"
    code_list = tuple(c.strip().upper() for c in (codes or "").split(",") if c.strip())
    if not chip:
        node_entries.append(f"{kind} ({', '.join(code_list) or 'no codes'})")
        return None
    if not isinstance(chip, str):
        return f"npu_name {chip!r} is not a string"
    if level in NORMAL:
        return None
    if level not in Level.__members__.values():
        return f"{chip}: fault_handling {level!r} is not a MindCluster level"
    if kind not in FaultType.__members__.values():
        return f"{chip}: fault_type {kind!r} is neither CardUnhealthy nor CardNetworkUnhealthy"
    since = _since(entry.get("fault_time_and_level_map"))
    return ChipFault(chip=chip, level=Level(str(level)), fault_type=FaultType(str(kind)), codes=code_list, since=since)


def _faults(raw: str, where: str, source: str) -> tuple[list[ChipFault], list[str], list[FormatProblem]]:
    problems: list[FormatProblem] = []
    node_entries: list[str] = []
    entries, wrong = _load(raw)
    if wrong:
        return [], [], [FormatProblem(source, where, wrong)]
    if not isinstance(entries, list):
        return [], [], [FormatProblem(source, where, f"a JSON {type(entries).__name__}, not a list")]
    faults: list[ChipFault] = []
    for i, entry in enumerate(entries):
        read = _entry(entry, node_entries)
        if isinstance(read, str):
            problems.append(FormatProblem(source, f"{where}[{i}]", read))
        elif read is not None:
            faults.append(read)
    return faults, node_entries, problems


def parse_device_info(node: str, data: Mapping[str, str] | None) -> NodeChips:
    """The plugin's ConfigMap data for `node` (None or no DeviceInfoCfg: not reported, not a problem)."""
    source = f"ConfigMap {DEVICE_INFO_NAMESPACE}/{DEVICE_INFO_PREFIX}{node}"
    data = data or {}
    manual = _names(data.get(MANUALLY_SEPARATED_KEY) or "")
    raw = data.get(DEVICE_INFO_KEY)
    if raw is None:
        return NodeChips(node=node, manually_separated=manual)
    doc, wrong = _load(raw)
    if wrong:
        return NodeChips(
            node=node, manually_separated=manual, problems=(FormatProblem(source, DEVICE_INFO_KEY, wrong),)
        )
    doc = doc if isinstance(doc, dict) else {}
    info = doc.get("DeviceInfo")
    devices = info.get("DeviceList") if isinstance(info, dict) else None
    if not isinstance(info, dict) or not isinstance(devices, dict):
        problem = FormatProblem(source, DEVICE_INFO_KEY, "no DeviceInfo.DeviceList object")
        return NodeChips(node=node, manually_separated=manual, problems=(problem,))
    problems: list[FormatProblem] = []
    check = doc.get("CheckCode")
    if isinstance(check, str) and check and check != hashlib.sha256(_go_json(info).encode()).hexdigest():
        problems.append(FormatProblem(source, f"{DEVICE_INFO_KEY}.CheckCode", "does not match DeviceInfo"))
    updated = info.get("UpdateTime")
    if not isinstance(updated, int):
        problems.append(FormatProblem(source, f"{DEVICE_INFO_KEY}.DeviceInfo.UpdateTime", f"{updated!r} not seconds"))
    lists: dict[str, set[str]] = {s: set() for s in ("", UNHEALTHY_SUFFIX, NETWORK_UNHEALTHY_SUFFIX, RECOVERING_SUFFIX)}
    faults: list[ChipFault] = []
    node_entries: list[str] = []
    fault_keys = [k for k in devices if k.endswith(FAULT_SUFFIX)]
    if not fault_keys:
        problems.append(FormatProblem(source, f"{DEVICE_INFO_KEY}.DeviceInfo.DeviceList", "no <resource>-Fault key"))
    for key in fault_keys:
        resource, where = key.removesuffix(FAULT_SUFFIX), f"{DEVICE_INFO_KEY}.DeviceInfo.DeviceList[{key}]"
        value = devices[key]
        if not isinstance(value, str):
            problems.append(FormatProblem(source, where, "not a JSON string"))
        else:
            read, nodes, bad = _faults(value, where, source)
            faults, node_entries, problems = faults + read, node_entries + nodes, problems + bad
        for suffix, names in lists.items():
            listed = devices.get(resource + suffix, "")
            if isinstance(listed, str):
                names |= _names(listed)
            else:
                problems.append(FormatProblem(source, f"DeviceList[{resource + suffix}]", "not a comma-joined string"))
    return NodeChips(
        node=node,
        reported=True,
        updated=float(updated) if isinstance(updated, int) else None,
        faults=tuple(faults),
        free=frozenset(lists[""]),
        unhealthy=frozenset(lists[UNHEALTHY_SUFFIX]),
        network_unhealthy=frozenset(lists[NETWORK_UNHEALTHY_SUFFIX]),
        recovering=frozenset(lists[RECOVERING_SUFFIX]),
        manually_separated=manual,
        node_entries=tuple(node_entries),
        problems=tuple(problems),
    )


def _dev(dev: object) -> str | None:
    if not isinstance(dev, Mapping):
        return None
    codes = dev.get("FaultCode")
    code_text = ", ".join(str(c) for c in codes) if isinstance(codes, list) else "no codes"
    return f"{dev.get('DeviceType')} {dev.get('DeviceId')}: {dev.get('FaultLevel')} ({code_text})"


def parse_node_info(node: str, data: Mapping[str, str] | None) -> NodeInfo:
    """NodeD's ConfigMap data for `node`; None (NodeD deleted it, or never wrote it) is a healthy node."""
    source = f"ConfigMap {NODE_INFO_NAMESPACE}/{NODE_INFO_PREFIX}{node}"
    raw = (data or {}).get(NODE_INFO_KEY)
    if raw is None:
        return NodeInfo(node=node)
    doc, wrong = _load(raw)
    if wrong:
        return NodeInfo(node=node, problems=(FormatProblem(source, NODE_INFO_KEY, wrong),))
    info = doc.get("NodeInfo") if isinstance(doc, dict) else None
    if not isinstance(info, dict):
        return NodeInfo(node=node, problems=(FormatProblem(source, NODE_INFO_KEY, "no NodeInfo object"),))
    status = info.get("NodeStatus")
    problems: list[FormatProblem] = []
    if status not in NodeStatus.__members__.values():
        problems.append(FormatProblem(source, f"{NODE_INFO_KEY}.NodeInfo.NodeStatus", f"{status!r} is not a status"))
    devs = info.get("FaultDevList") or []
    listed = [d for d in (_dev(x) for x in devs) if d] if isinstance(devs, list) else []
    if not isinstance(devs, list) or len(listed) < len(devs):
        problems.append(FormatProblem(source, f"{NODE_INFO_KEY}.NodeInfo.FaultDevList", "not a list of objects"))
    known = NodeStatus(status) if isinstance(status, str) and status in NodeStatus.__members__.values() else None
    known = known or NodeStatus.HEALTHY
    return NodeInfo(node=node, status=known, faulty_devices=tuple(listed), problems=tuple(problems))


def _configured(raw: str, prefix: str) -> frozenset[str] | str:
    """The chips of a configuration annotation, or what is wrong with it."""
    doc, wrong = _load(raw)
    if wrong:
        return wrong
    devices = doc.get("devices") if isinstance(doc, dict) else None
    if not isinstance(devices, list):
        return "no devices list"
    ids = [d.get("device_id") for d in devices if isinstance(d, dict)]
    if len(ids) < len(devices) or not all(isinstance(i, str) and i.isdigit() for i in ids):
        return "a device without a numeric device_id"
    return frozenset(f"{prefix}-{i}" for i in ids)


def pod_chips(annotations: Mapping[str, str] | None, *, resource: str = NPU_RESOURCE) -> PodChips:
    """The chips the plugin mounted into a pod, from the most faithful annotation present (empty until the
    plugin annotated it). `resource` names the Volcano annotation and, without its `huawei.com/`, the chip
    prefix of a configuration's device ids ("Ascend910" -> "Ascend910-3")."""
    annotations = annotations or {}
    problems: list[FormatProblem] = []
    if chips := _names(annotations.get(ANNOTATION_REAL, "")):
        return PodChips(chips=chips, source=ANNOTATION_REAL)
    prefix = resource.rsplit("/", 1)[-1]
    for key in ANNOTATION_CONFIGURATIONS:
        if raw := annotations.get(key):
            read = _configured(raw, prefix)
            if isinstance(read, str):
                problems.append(FormatProblem("pod annotations", key, read))
            elif read:
                return PodChips(chips=read, source=key, problems=tuple(problems))
    for key in (resource, ANNOTATION_KUBELET):
        if chips := _names(annotations.get(key, "")):
            return PodChips(chips=chips, source=key, problems=tuple(problems))
    return PodChips(problems=tuple(problems))
