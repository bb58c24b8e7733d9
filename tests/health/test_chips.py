"""The device plugin's and NodeD's reports, read as the plugin writes them, into the pod's hardware verdict.

The reports are built in the plugin's own format (health/chips.py names the MindCluster source lines); one
case is the MindCluster documentation's own example, verbatim. What a user notices: a pod on a chip the
plugin separated is named with its node, chip, level and codes; a fault on a chip it does not hold, a
RestartRequest inside MindCluster's 60 s, sub-health and a single-node engine's network fault roll nothing;
a node going bad is one NodeUnhealthy, not a roll per chip; a malformed report is a named problem.
"""

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ascend_operator.api.health import HealthSpec
from ascend_operator.contract.mindcluster import NodeReport, check_code, node_report, parse_device_info, pod_chips
from ascend_operator.disruption import RollReason
from ascend_operator.health.chips import ChipFinding, judge_chips, observed_only, separating
from ascend_operator.health.judge import PodHealth
from ascend_operator.health.machine import Observations, step

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mindcluster"
NOW = 1_800_000_000.0
ALL = ",".join(f"Ascend910-{i}" for i in range(8))


def fault(chip: int, level: str, codes: str = "80E18402", *, network: bool = False, age: float = 5.0) -> dict[str, Any]:
    """One entry of `huawei.com/Ascend910-Fault` (proto.go:222-236), its fault `age` seconds old at NOW."""
    at = int((NOW - age) * 1000)
    return {
        "fault_type": "CardNetworkUnhealthy" if network else "CardUnhealthy",
        "npu_name": f"Ascend910-{chip}",
        "large_model_fault_level": level,
        "fault_level": level,
        "fault_handling": level,
        "fault_code": codes,
        "fault_time_and_level_map": {c: {"fault_time": at, "fault_level": level} for c in codes.split(",") if c},
    }


def device_info(
    *faults: dict[str, Any], free: str = "", age: float = 0.0, volcano: tuple[str, ...] = ()
) -> dict[str, str]:
    """The ConfigMap data the plugin writes for a node (ascend910.go:664-676, proto.go:36-42), in Go's compact
    layout (the generated fixtures hold it to the plugin's bytes). A chip at PreSeparateNPU stays off the
    Unhealthy list only while a pod's `huawei.com/Ascend910` annotation names it (`volcano`: only Volcano's
    scheduler writes it; device/ascendcommon.go:1144-1148 isHealthy, 1160-1174 npuIsUsedNow)."""
    unhealthy = ",".join(
        f["npu_name"]
        for f in faults
        if f["fault_type"] == "CardUnhealthy"
        and not (f["fault_handling"] == "PreSeparateNPU" and f["npu_name"] in volcano)
    )
    devices = {
        "huawei.com/Ascend910": free,
        "huawei.com/Ascend910-Fault": json.dumps(list(faults)),
        "huawei.com/Ascend910-NetworkUnhealthy": "",
        "huawei.com/Ascend910-Recovering": "",
        "huawei.com/Ascend910-Unhealthy": unhealthy,
    }
    stamp = int(NOW - age)
    devices["huawei.com/Ascend910-Fault"] = json.dumps(list(faults), separators=(",", ":"))
    doc = {"DeviceInfo": {"DeviceList": devices, "UpdateTime": stamp}, "SuperPodID": -2, "ServerIndex": -2}
    return {"DeviceInfoCfg": json.dumps(doc | {"CheckCode": check_code(doc["DeviceInfo"])}, separators=(",", ":"))}


def signed(device_info: dict[str, Any]) -> dict[str, str]:
    """A report whose DeviceInfo is as given, with the CheckCode the plugin would write for it."""
    return {"DeviceInfoCfg": json.dumps({"DeviceInfo": device_info, "CheckCode": check_code(device_info)})}


def npu_named(*faults: dict[str, Any]) -> dict[str, str]:
    """The same report from a plugin that renames `huawei.com/Ascend910` keys and `Ascend910-` chips to
    `huawei.com/npu` and `npu-` (customname/public_name_config.go:203-215)."""
    text = device_info(*faults)["DeviceInfoCfg"]
    doc = json.loads(text.replace("huawei.com/Ascend910", "huawei.com/npu").replace("Ascend910-", "npu-"))
    # renamed before the write (ascendcommon.go writeDeviceInfoCm), so the CheckCode covers the new names
    return {"DeviceInfoCfg": json.dumps(doc | {"CheckCode": check_code(doc["DeviceInfo"])})}


def node_info(status: str) -> dict[str, str]:
    """NodeD's ConfigMap data (noded/pkg/common/type.go:50-79)."""
    info = {"FaultDevList": [], "NodeStatus": status}
    return {"NodeInfo": json.dumps({"NodeInfo": info, "CheckCode": check_code(info)})}


def seen(
    data: dict[str, str] | None, noded: dict[str, str] | None = None, *, ago: float = 0.0, capacity: int | None = 8
) -> NodeReport:
    """The node's report as clients/chip_reports.py hands it over: seen changing `ago` seconds before NOW by
    this operator's clock, with the node's NPU capacity (an Atlas 800 A2 lists 8)."""
    return replace(node_report("atlas-0", data, noded), seen=NOW - ago, chips_per_node=capacity)


def verdict(
    data: dict[str, str] | None,
    chips: str,
    *,
    noded: dict[str, str] | None = None,
    group: bool = False,
    ago: float = 0.0,
) -> ChipFinding | None:
    report = seen(data, noded, ago=ago)
    return judge_chips(report, pod_chips({"huawei.com/AscendReal": chips}), group_member=group, now=NOW)


CASES: list[tuple[str, dict[str, str] | None, str, dict[str, str] | None, bool, str | None, float]] = [
    # (case, device info, the pod's chips, NodeD, group member, expected: None, "node" or the chip named,
    #  seconds since this operator saw the report change)
    ("healthy: no faults and no free chip (all 8 allocated)", device_info(), ALL, None, False, None, 0.0),
    ("no report at all", None, ALL, None, False, None, 0.0),
    ("SeparateNPU on a chip the pod holds", device_info(fault(4, "SeparateNPU")), ALL, None, False, "Ascend910-4", 0.0),
    ("SeparateNPU on a chip the pod does not hold", device_info(fault(4, "SeparateNPU")), "Ascend910-0,Ascend910-1",
     None, False, None, 0.0),
    ("RestartNPU", device_info(fault(2, "RestartNPU")), ALL, None, False, "Ascend910-2", 0.0),
    ("FreeRestartNPU", device_info(fault(2, "FreeRestartNPU")), ALL, None, False, "Ascend910-2", 0.0),
    ("RestartBusiness", device_info(fault(2, "RestartBusiness")), ALL, None, False, "Ascend910-2", 0.0),
    ("PreSeparateNPU", device_info(fault(2, "PreSeparateNPU")), ALL, None, False, "Ascend910-2", 0.0),
    ("RestartRequest for 30 s: MindCluster waits 60", device_info(fault(3, "RestartRequest", age=30)), ALL, None,
     False, None, 0.0),
    ("RestartRequest for 61 s", device_info(fault(3, "RestartRequest", age=61)), ALL, None, False, "Ascend910-3", 0.0),
    ("SubHealthFault: reported only", device_info(fault(3, "SubHealthFault")), ALL, None, False, None, 0.0),
    ("NotHandleFault: reported only", device_info(fault(3, "NotHandleFault")), ALL, None, False, None, 0.0),
    ("network fault, single-node engine (HCCS inside the node)", device_info(fault(0, "SeparateNPU", network=True)),
     ALL, None, False, None, 0.0),
    ("network fault, multi-node group member (RoCE between nodes)",
     device_info(fault(0, "SeparateNPU", network=True)), ALL, None, True, "Ascend910-0", 0.0),
    ("eight chips failing at once", device_info(*(fault(i, "SeparateNPU") for i in range(8))), ALL, None, False,
     "node", 0.0),
    ("NodeD UnHealthy", device_info(), ALL, node_info("UnHealthy"), False, "node", 0.0),
    ("NodeD PreSeparate: the chips decide (new engines keep off: keep_off)", device_info(), ALL,
     node_info("PreSeparate"), False, None, 0.0),
    ("manually separated, its fault since cleared: still out until an administrator releases it",
     {**device_info(), "ManuallySeparateNPU": "Ascend910-5"}, ALL, None, False, "Ascend910-5", 0.0),
    ("manually separated chip the pod does not hold", {**device_info(), "ManuallySeparateNPU": "Ascend910-5"},
     "Ascend910-0", None, False, None, 0.0),
    ("a report unchanged for 14 min: the plugin is late but not gone", device_info(fault(4, "SeparateNPU")), ALL,
     None, False, "Ascend910-4", 840.0),
    ("a report unchanged for 16 min: the plugin stopped, its faults are not acted on",
     device_info(fault(4, "SeparateNPU")), ALL, None, False, None, 960.0),
    ("a node whose clock is 16 min behind, its report just seen: acted on (UpdateTime is the node's clock, "
     "device/ascendcommon.go:430)", device_info(fault(4, "SeparateNPU"), age=960), ALL, None, False, "Ascend910-4",
     0.0),
    ("eight chips in a stale report: not a node cause", device_info(*(fault(i, "SeparateNPU") for i in range(8))),
     ALL, None, False, None, 960.0),
    ("NodeD UnHealthy beside a stale plugin report: NodeD decides", device_info(), ALL,
     node_info("UnHealthy"), False, "node", 960.0),
    ("a hot reset's NormalNPU entry (no code left): not acted on", device_info(fault(5, "NormalNPU", "")), ALL,
     None, False, None, 0.0),
    ("a plugin that names its chips huawei.com/npu", npu_named(fault(1, "SeparateNPU")), "npu-0,npu-1", None, False,
     "npu-1", 0.0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "data", "chips", "noded", "group", "expected", "ago"), CASES, ids=[c[0] for c in CASES]
)
def test_the_pods_hardware_verdict(
    case: str,
    data: dict[str, str] | None,
    chips: str,
    noded: dict[str, str] | None,
    group: bool,
    expected: str | None,
    ago: float,
) -> None:
    found = verdict(data, chips, noded=noded, group=group, ago=ago)
    if expected is None:
        assert found is None
    elif expected == "node":
        assert found is not None
        assert found.node_wide
        assert "atlas-0" in found.message
    else:
        assert found is not None
        assert not found.node_wide
        assert found.chip == expected
        assert f"chip {expected} on node atlas-0" in found.message


def test_the_message_names_node_chip_level_and_codes_and_the_worst_fault_wins() -> None:
    data = device_info(fault(1, "RestartBusiness", "80C98000"), fault(4, "SeparateNPU", "A8028801,80E18402"))
    found = verdict(data, ALL)
    assert found == ChipFinding(
        node_wide=False,
        message="chip Ascend910-4 on node atlas-0: fault at level SeparateNPU (codes A8028801, 80E18402), "
        "reported by the Ascend device plugin",
        chip="Ascend910-4",
        level="SeparateNPU",
    )


DRAIN_CASES: list[tuple[str, dict[str, str], str, bool]] = [
    # (case, device info, the chip named, drained first)
    ("PreSeparateNPU alone: the chip still works for the pod, which is drained",
     device_info(fault(2, "PreSeparateNPU")), "Ascend910-2", True),
    ("two chips pre-separated: still drained", device_info(fault(2, "PreSeparateNPU"), fault(5, "PreSeparateNPU")),
     "Ascend910-2", True),
    ("PreSeparateNPU beside a RestartBusiness: the work is broken, cut off at once naming the breaking chip",
     device_info(fault(2, "PreSeparateNPU"), fault(6, "RestartBusiness")), "Ascend910-6", False),
    ("FreeRestartNPU: service execution is affected, not drained", device_info(fault(2, "FreeRestartNPU")),
     "Ascend910-2", False),
    ("SeparateNPU", device_info(fault(2, "SeparateNPU")), "Ascend910-2", False),
    ("RestartRequest past 60 s", device_info(fault(3, "RestartRequest", age=61)), "Ascend910-3", False),
]  # fmt: skip


@pytest.mark.parametrize(("case", "data", "chip", "drain"), DRAIN_CASES, ids=[c[0] for c in DRAIN_CASES])
def test_only_a_pre_separated_chip_lets_its_pod_drain(case: str, data: dict[str, str], chip: str, drain: bool) -> None:
    found = verdict(data, ALL)
    assert found is not None
    assert (found.chip, found.drain) == (chip, drain)


SEPARATING_CASES: list[tuple[str, dict[str, str], bool]] = [
    # (case, device info, new engines kept off the node)
    ("Volcano's pod holds a pre-separated chip: it counts allocatable, the successor would land on it",
     device_info(fault(2, "PreSeparateNPU"), volcano=("Ascend910-2",)), True),
    ("without Volcano the plugin lists it Unhealthy at once: allocatable tells the truth",
     device_info(fault(2, "PreSeparateNPU")), False),
    ("a SeparateNPU chip is Unhealthy at once", device_info(fault(2, "SeparateNPU")), False),
]  # fmt: skip


@pytest.mark.parametrize(("case", "data", "kept_off"), SEPARATING_CASES, ids=[c[0] for c in SEPARATING_CASES])
def test_a_node_is_kept_off_while_a_chip_to_separate_still_counts_allocatable(
    case: str, data: dict[str, str], kept_off: bool
) -> None:
    why = separating(seen(data), now=NOW)
    assert (why is not None) == kept_off
    if why is not None:
        assert why.startswith("chip(s) Ascend910-2 of node atlas-0 are to be separated once free (PreSeparateNPU)")


def test_the_documentations_own_example_reads_as_the_plugin_means_it() -> None:
    example = json.loads((FIXTURES / "deviceinfo-docs-example.json").read_text())
    report = parse_device_info("atlas-a3", {"DeviceInfoCfg": example["DeviceInfoCfg"]})
    assert report.problems == ()
    assert report.unhealthy == frozenset({"Ascend910-4"})
    by_chip = {f.chip: (f.level, f.network, f.codes) for f in report.faults}
    assert by_chip == {
        "Ascend910-0": ("PreSeparateNPU", True, ("81078603",)),
        "Ascend910-4": ("SeparateNPU", False, ("A8028801", "A4028801", "80E18402", "80E18401")),
    }
    assert report.faults[1].since == 1744167455.784  # the plugin's fault_time is in milliseconds
    assert report.updated == 1744182144  # the node's clock: kept, never compared with this operator's
    report, now = replace(report, seen=NOW - 60), NOW  # seen a minute ago
    single = judge_chips(report, {"Ascend910-0", "Ascend910-4"}, group_member=False, now=now)
    assert single is not None
    assert (single.chip, single.level) == ("Ascend910-4", "SeparateNPU")
    # a pod on chip 0 alone: its network fault matters only to a group spanning nodes
    assert judge_chips(report, {"Ascend910-0"}, group_member=False, now=now) is None
    assert observed_only(report, {"Ascend910-0"}, group_member=False, now=now) == (
        "Ascend910-0: PreSeparateNPU (81078603)",
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"DeviceInfoCfg": "{not json"}, "DeviceInfoCfg: not the plugin's DeviceInfo JSON"),
        (signed({"DeviceList": {"huawei.com/Ascend910-Fault": "[{"}}),
         "DeviceInfoCfg.DeviceList[huawei.com/Ascend910-Fault]: not a JSON list"),
        (signed({"DeviceList": {"huawei.com/Ascend910-Fault": '[{"x": 1}]'}}),
         "DeviceInfoCfg.DeviceList[huawei.com/Ascend910-Fault]: 1 entries unread"),
    ],
)  # fmt: skip
def test_a_malformed_report_is_a_named_problem_not_an_error(data: dict[str, str], problem: str) -> None:
    report = node_report("atlas-0", data, {"NodeInfo": "[]"})
    assert report.problems == (problem, "NodeInfo: not NodeD's NodeInfo JSON")
    assert judge_chips(report, {"Ascend910-0"}, group_member=False, now=NOW) is None


def test_pods_chips_come_from_the_plugins_annotation() -> None:
    assert pod_chips({"huawei.com/AscendReal": "Ascend910-0, Ascend910-1"}) == {"Ascend910-0", "Ascend910-1"}
    assert pod_chips({}) == frozenset()
    assert pod_chips(None) == frozenset()


@pytest.mark.parametrize(("node_wide", "reason"), [(False, RollReason.NPU_FAULT), (True, RollReason.NODE_UNHEALTHY)])
def test_the_machine_takes_the_pod_out_and_asks_for_a_roll_even_while_it_drains(
    node_wide: bool, reason: RollReason
) -> None:
    """A faulty chip outranks everything (the engine's answers included), and a pod draining for a planned
    deletion is rolled at once rather than left to finish on a chip the plugin separated."""
    finding = ChipFinding(node_wide=node_wide, message="m", chip="Ascend910-4", level="SeparateNPU")
    for draining in (False, True):
        _, verdict, actions = step(
            PodHealth(), Observations(chips=finding, draining=draining), now=NOW, cfg=HealthSpec()
        )
        assert verdict.ready is False
        assert verdict.roll == reason
        assert [a.reason for a in actions if type(a).__name__ == "RequestRoll"] == [reason]
    healed, verdict, _ = step(PodHealth(chips=finding), Observations(), now=NOW, cfg=HealthSpec())
    assert healed.chips is None  # the plugin cleared it: the next pass judges the engine again
    assert verdict.reason != reason.value


def test_a_stale_report_says_so_among_what_is_reported_but_not_acted_on() -> None:
    report = seen(device_info(fault(4, "SeparateNPU")), ago=960)
    said = observed_only(report, {"Ascend910-4"}, group_member=False, now=NOW)
    assert said[0] == (
        "the Ascend device plugin's report of node atlas-0 has not changed for 960s (it rewrites it at least "
        "every 300s): the plugin has stopped, its faults are not acted on"
    )
    assert said[1].startswith("Ascend910-4: SeparateNPU")


#: Go 1.26's encoding/json + crypto/sha256 on the same values (a 20-line program, run once): what
#: MindCluster's MakeDataHash gives. HTML characters and U+2028 are escaped by Go, a nil slice is null.
GO_HASHES = [
    ({"a": "<&>\u2028é"}, "f1b015ab92f2e6c2f592192d96fda7390668ab3c23bde3b3774e95380c04e939"),
    ({"FaultDevList": [{"DeviceType": "NPU", "DeviceId": 3, "FaultCode": ["2C000031"], "FaultLevel": "SeparateFault"}],
      "NodeStatus": "UnHealthy"}, "6d7c4b0161fa7bbcd4465b368684b71d14a536be21d1273483bb2ba22f22a68b"),
    ({"FaultDevList": None, "NodeStatus": "Healthy"},
     "0e41611c88c69578c004cb930ce23dc99e68844eae5cbac1ea0b6a9f789bfaf0"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), GO_HASHES)
def test_check_code_is_gos_hash(value: object, expected: str) -> None:
    assert check_code(value) == expected


def test_the_plugins_own_check_code_matches_and_an_altered_report_is_not_acted_on() -> None:
    example = json.loads((FIXTURES / "deviceinfo-docs-example.json").read_text())
    doc = json.loads(example["DeviceInfoCfg"])
    assert check_code(doc["DeviceInfo"]) == doc["CheckCode"]  # the MindCluster docs' real report
    edited = dict(doc, DeviceInfo=dict(doc["DeviceInfo"], UpdateTime=doc["DeviceInfo"]["UpdateTime"] + 1))
    report = parse_device_info("atlas-a3", {"DeviceInfoCfg": json.dumps(edited)})
    assert report.faults == ()
    assert report.problems == (
        "DeviceInfoCfg.CheckCode does not match DeviceInfo (the report was altered or truncated): not acted on",
    )
    noded = {"NodeInfo": json.dumps({"NodeInfo": {"FaultDevList": [], "NodeStatus": "UnHealthy"}, "CheckCode": "x"})}
    altered = node_report("atlas-0", device_info(), noded)
    assert altered.node_status == "Healthy"
    assert altered.problems == (
        "NodeInfo.CheckCode does not match NodeInfo (the report was altered or truncated): not acted on",
    )
