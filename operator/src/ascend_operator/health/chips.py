"""The hardware under an engine: which pods hold an NPU MindCluster acts on. Pure.

Why: an engine whose chip failed (HBM ECC, chip hang, HCCS or RoCE link down) can keep answering /health,
and the device plugin never evicts it: it reports the chip unhealthy to the kubelet and, in inference
hot-reset mode, resets a faulty chip only once no pod holds it (ascend-device-plugin server/manager.go
875-1016). So the pod on a failed chip stays until someone deletes it, and the chip cannot recover while
it stays. The reports themselves (the plugin's and NodeD's ConfigMaps, the pod's chip annotation) are
read by ascend_operator.contract.mindcluster; this module is the policy on what they say.

Fault levels, most serious first (pkg/common/fault_code.go:36-60, precedence 1336-1358), and what this
operator does with each (docs/npu-faults.md):
ManuallySeparateNPU, SeparateNPU, PreSeparateNPU, RestartNPU, FreeRestartNPU, RestartBusiness: the pod is
rolled (`NPUFault`); RestartRequest: rolled once it has lasted over 60 s, as MindCluster itself waits
(docs/en/scheduling/api/ascend_device_plugin.md:24); SubHealthFault, NotHandleFault: reported, not acted
on; NormalNPU (a chip Unhealthy with no code left, as in a hot reset): read, not acted on. A network fault
(CardNetworkUnhealthy) acts only on a multi-node group's member, whose ranks talk over RoCE; a
single-node engine uses HCCS within the node. A node NodeD (or ClusterD's switch view) calls UnHealthy, or
with more than half its chips (by the node's NPU capacity) at a level that breaks the work, is one cause,
`NodeUnhealthy`, for every pod on it. New engines keep off such a node, off a node NodeD calls
PreSeparate, and off one whose pre-separated chip still counts allocatable (`keep_off`). Where ClusterD
runs, its processed view is read instead (contract/clusterd.py).
"""

from collections.abc import Iterable
from dataclasses import dataclass

from ascend_operator.contract.mindcluster import (
    LEVELS,
    NODE_PRESEPARATE,
    NODE_UNHEALTHY,
    RESTART_REQUEST,
    ChipFault,
    NodeReport,
)

#: Levels at which the pod goes.
ACTED_ON = frozenset(LEVELS[:6])
#: Of those, the level whose chip still works for the pod using it (the docs: "pre-isolate the chip; whether
#: to reschedule is decided by the job's actual running status"; the hot reset skips it, server/
#: hot_reset_manager.go:139-142). Its pod is drained, not cut off. How the plugin reports the chip to the
#: kubelet depends on who scheduled the pod (device/ascendcommon.go:1137-1149 isHealthy, 1160-1174
#: npuIsUsedNow): Healthy while a pod's `huawei.com/Ascend910` annotation names it, an annotation only
#: Volcano's scheduler writes (the plugin writes `huawei.com/AscendReal` and `huawei.com/kltDev`,
#: ascendcommon.go:1002-1003; `huawei.com/npu` on Atlas A5, ascend910.go:78-83); without Volcano, Unhealthy
#: at once. Either way the chip keeps working for the pod (the kubelet evicts nothing for an unhealthy
#: device). Every other acted-on level breaks or restarts the work on the chip (FreeRestartNPU: "service
#: execution is affected").
DRAINED = frozenset({"PreSeparateNPU"})
#: RestartRequest is acted on once the fault has lasted this long (MindCluster reschedules an inference job
#: after 60 s).
RESTART_REQUEST_SECONDS = 60.0
#: The plugin rewrites its report on every change and, unchanged, every 5 minutes (device/ascendcommon.go
#: 385-388, defaultUpdateTimeInterval), stamping DeviceInfo.UpdateTime with the node's clock
#: (device/ascendcommon.go:430, getNodeDeviceInfoCache), so the report changes at least that often. A report
#: this operator has not seen change for three of those rewrites (timed by its own clock from when it saw
#: the change: the node's clock may be off by any amount) is a plugin that stopped (crashed, evicted, its
#: node cut off): what it says is no longer known to be true, so its faults are reported and not acted on
#: (an engine on a chip that really failed still stops progressing, which the engine's own detectors catch).
STALE_SECONDS = 900.0


@dataclass(frozen=True)
class ChipFinding:
    """Why a pod's hardware fails it: its whole node (`node_wide`), or one chip it holds."""

    node_wide: bool
    message: str
    chip: str = ""
    level: str = ""
    drain: bool = False
    """Every fault acted on is at a DRAINED level: the pod still serves and is drained before it goes."""


def _severity(level: str) -> int:
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)


def _acts(fault: ChipFault, *, group_member: bool, now: float) -> bool:
    if fault.network and not group_member:
        return False
    if fault.level == RESTART_REQUEST:
        return fault.since is not None and now - fault.since > RESTART_REQUEST_SECONDS
    return fault.level in ACTED_ON


def stale(report: NodeReport, *, now: float) -> str | None:
    """Why the plugin's report of the node is no longer believed (this operator has not seen it change for
    STALE_SECONDS by its own clock), else None."""
    if report.seen is None or now - report.seen <= STALE_SECONDS:
        return None
    return (
        f"the Ascend device plugin's report of node {report.node} has not changed for {now - report.seen:.0f}s "
        f"(it rewrites it at least every 300s): the plugin has stopped, its faults are not acted on"
    )


def node_unhealthy(report: NodeReport, *, now: float) -> str | None:
    """Why the whole node is out (NodeD says so, or more than half its chips, by its capacity, have faults
    that break their work in a report that is not stale), else None. A PreSeparateNPU chip does not count:
    it still works, and its pod is drained, not cut off with the node's."""
    if report.node_status == NODE_UNHEALTHY:
        return f"NodeD reports node {report.node} {NODE_UNHEALTHY}"
    if report.switch_status == NODE_UNHEALTHY:
        return f"ClusterD reports node {report.node}'s switch {NODE_UNHEALTHY}"
    if stale(report, now=now) is not None or report.chips_per_node is None:
        return None
    bad = sorted({f.chip for f in report.faults if f.level in ACTED_ON - DRAINED and not f.network})
    if len(bad) > report.chips_per_node // 2:
        return f"{len(bad)} of {report.chips_per_node} chips of node {report.node} are faulty ({', '.join(bad)})"
    return None


def separating(report: NodeReport, *, now: float) -> str | None:
    """Why new engines must keep off the node for now: a chip at a DRAINED level that the plugin still counts
    allocatable (it reports such a chip Healthy while a pod uses it, and Unhealthy only some time after the
    pod is gone), so the scheduler would bind the drained pod's successor right back onto it. None once the
    plugin lists the chip Unhealthy (allocatable then tells the truth) or when the report is stale."""
    if stale(report, now=now) is not None:
        return None
    chips = sorted({f.chip for f in report.faults if f.level in DRAINED and f.chip not in report.unhealthy})
    if not chips:
        return None
    return (
        f"chip(s) {', '.join(chips)} of node {report.node} are to be separated once free (PreSeparateNPU) while "
        "the device plugin still counts them allocatable"
    )


def keep_off(report: NodeReport, *, now: float) -> str | None:
    """Why new engines keep off the node, else None: MindCluster takes it out whole (`node_unhealthy`), NodeD
    calls it PreSeparate (MindCluster's scheduler places nothing new there), or a chip to separate once free
    still counts allocatable (`separating`)."""
    if (why := node_unhealthy(report, now=now)) is not None:
        return why
    if report.node_status == NODE_PRESEPARATE:
        return (
            f"NodeD reports node {report.node} {NODE_PRESEPARATE} (sub-healthy: MindCluster places nothing new there)"
        )
    return separating(report, now=now)


def judge_chips(report: NodeReport, chips: Iterable[str], *, group_member: bool, now: float) -> ChipFinding | None:
    """The pod's hardware verdict: None, its node (the judge's NodeUnhealthy), or its most serious chip
    fault (NPUFault; NPUPreSeparate when every fault acted on leaves the chip working for the pod)."""
    if (why := node_unhealthy(report, now=now)) is not None:
        return ChipFinding(node_wide=True, message=why)
    if stale(report, now=now) is not None:
        return None
    held = set(chips)
    acted = [f for f in report.faults if f.chip in held and _acts(f, group_member=group_member, now=now)]
    if not acted:
        return None
    breaking = [f for f in acted if f.level not in DRAINED]
    worst = min(breaking or acted, key=lambda f: _severity(f.level))
    kind = "network fault" if worst.network else "fault"
    message = (
        f"chip {worst.chip} on node {report.node}: {kind} at level {worst.level} "
        f"(codes {', '.join(worst.codes) or 'none given'}), reported by {report.source}"
    )
    return ChipFinding(node_wide=False, message=message, chip=worst.chip, level=worst.level, drain=not breaking)


def observed_only(report: NodeReport, chips: Iterable[str], *, group_member: bool, now: float) -> tuple[str, ...]:
    """Faults on the pod's chips this operator reports but does not act on (sub-health, not handled, a
    RestartRequest inside its 60 s, a network fault of a single-node engine, any fault of a stale report)."""
    held = set(chips)
    if (why := stale(report, now=now)) is not None:
        return (why, *(f"{f.chip}: {f.level} ({', '.join(f.codes)})" for f in report.faults if f.chip in held))
    return tuple(
        f"{f.chip}: {f.level} ({', '.join(f.codes)})"
        for f in report.faults
        if f.chip in held and not _acts(f, group_member=group_member, now=now)
    )
