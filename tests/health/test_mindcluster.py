"""MindCluster as it ships: reports read from the bytes its components write, and what a user then sees.

The fixtures under tests/fixtures/mindcluster/generated are written by hack/mindcluster-fixtures (Go's own
encoding/json and crypto/sha256, as the plugin's MarshalData/MakeDataHash; regenerate with
`cd hack/mindcluster-fixtures && go run . ../../tests/fixtures/mindcluster/generated`). What a user notices:
a pre-separated chip drains its pod with or without Volcano, and new engines are kept off its node only
while the plugin still counts it allocatable (with Volcano); a hot reset raises no warning; NodeD's
PreSeparate keeps new engines off; an A3 node's 16 chips set the "more than half" bar and pre-separated
chips do not count toward it; a renamed resource is named as unknown, never read as healthy; ClusterD's
view, where it runs, is what the operator goes by.
"""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ascend_operator.contract.clusterd import preferred, read_cluster_view
from ascend_operator.contract.mindcluster import NodeReport, node_report, parse_device_info
from ascend_operator.health.chips import judge_chips, keep_off, node_unhealthy, observed_only
from tests.health.test_chips import NOW, device_info, fault, node_info

GENERATED = Path(__file__).resolve().parents[1] / "fixtures" / "mindcluster" / "generated"
A2 = {f"Ascend910-{i}" for i in range(8)}


def data(name: str) -> dict[str, str]:
    """The ConfigMap data of a generated fixture."""
    return dict(json.loads((GENERATED / f"{name}.json").read_text())["data"])


def report(name: str, *, capacity: int | None = 8, noded: dict[str, str] | None = None) -> NodeReport:
    """The fixture's report as clients/chip_reports.py hands it over: just seen, the node's capacity known."""
    return replace(node_report("atlas-0", data(name), noded), seen=NOW, chips_per_node=capacity)


@pytest.mark.parametrize(
    ("fixture", "builder"),
    [
        ("preseparate-volcano", device_info(fault(2, "PreSeparateNPU", "81078603"), volcano=("Ascend910-2",))),
        ("preseparate-no-volcano", device_info(fault(2, "PreSeparateNPU", "81078603"))),
        ("hot-reset-normalnpu", device_info(fault(5, "NormalNPU", ""))),
    ],
)
def test_the_tests_report_builder_writes_the_plugins_own_bytes(fixture: str, builder: dict[str, str]) -> None:
    """The plugin's DeviceInfoCfg (client_server.go:191-225: MakeDataHash over DeviceInfo, MarshalData of the
    whole) as Go writes it, byte for byte, CheckCode included: the Python builder the other tests use
    cannot drift from it."""
    assert builder["DeviceInfoCfg"] == data(fixture)["DeviceInfoCfg"]
    assert parse_device_info("atlas-0", data(fixture)).problems == ()


PRESEPARATE: list[tuple[str, str, bool]] = [
    # (case, fixture, new engines kept off the node)
    ("with Volcano: the plugin keeps the chip Healthy for the pod (ascendcommon.go:1144-1147), allocatable "
     "still counts it, so the successor would land right back on it", "preseparate-volcano", True),
    ("without Volcano: no pod carries huawei.com/Ascend910, the plugin lists the chip Unhealthy at once "
     "(ascendcommon.go:1148), allocatable drops, nothing to fence", "preseparate-no-volcano", False),
]  # fmt: skip


@pytest.mark.parametrize(("case", "fixture", "fenced"), PRESEPARATE, ids=[c[0][:40] for c in PRESEPARATE])
def test_a_pre_separated_chip_drains_its_pod_with_or_without_volcano(case: str, fixture: str, fenced: bool) -> None:
    """The chip keeps working for its pod either way (the kubelet evicts nothing for an unhealthy device and
    the hot reset skips PreSeparateNPU, server/hot_reset_manager.go:139-142): the pod drains in both; only
    the fence follows what the plugin tells the kubelet."""
    node = report(fixture)
    found = judge_chips(node, A2, group_member=False, now=NOW)
    assert found is not None
    assert (found.chip, found.level, found.drain, found.node_wide) == ("Ascend910-2", "PreSeparateNPU", True, False)
    why = keep_off(node, now=NOW)
    assert (why is not None) == fenced
    if why is not None:
        assert "Ascend910-2 of node atlas-0 are to be separated once free (PreSeparateNPU)" in why


def test_a_hot_resets_normalnpu_entry_raises_no_warning_and_rolls_nothing() -> None:
    """A chip Unhealthy with no fault code left gets an entry at NormalNPU (ascendcommon.go:783-812,
    fault_code.go:1171-1174): read, reported among what is not acted on, never ChipReportUnreadable."""
    node = report("hot-reset-normalnpu")
    assert node.problems == ()
    assert [(f.chip, f.level, f.codes) for f in node.faults] == [("Ascend910-5", "NormalNPU", ())]
    assert judge_chips(node, A2, group_member=False, now=NOW) is None
    assert keep_off(node, now=NOW) is None
    assert observed_only(node, A2, group_member=False, now=NOW) == ("Ascend910-5: NormalNPU ()",)


def test_noded_preseparate_keeps_new_engines_off_and_rolls_nothing() -> None:
    """NodeD's PreSeparate (noded control/faultcontrol/fault.go:181-193) is a sub-healthy node: Volcano places
    nothing new there (ascend-for-volcano internal/rescheduling/reschedule.go:860-863), its pods run on."""
    node = report("preseparate-no-volcano", noded=data("noded-preseparate"))
    assert node.node_status == "PreSeparate"
    assert node_unhealthy(node, now=NOW) is None
    assert keep_off(node, now=NOW) == (
        "NodeD reports node atlas-0 PreSeparate (sub-healthy: MindCluster places nothing new there)"
    )
    healthy = report("hot-reset-normalnpu")
    assert keep_off(healthy, now=NOW) is None
    assert keep_off(replace(healthy, node_status="PreSeparate"), now=NOW) is not None
    assert judge_chips(replace(healthy, node_status="PreSeparate"), A2, group_member=False, now=NOW) is None


CAPACITY: list[tuple[str, str, int | None, str | None]] = [
    # (case, fixture, the node's NPU capacity, expected node-wide message or None)
    ("5 of 16 A3 chips separated: not more than half", "a3-five-separate", 16, None),
    ("the same 5 on an 8-chip node: more than half", "a3-five-separate", 8, "5 of 8 chips of node atlas-0 are faulty"),
    ("9 of 16 separated: more than half", "a3-nine-separate", 16, "9 of 16 chips of node atlas-0 are faulty"),
    ("9 of 16 pre-separated: still working, drained one by one, not a node-wide cut", "a3-nine-preseparate", 16,
     None),
    ("capacity unknown: the rule waits for it (NodeD's word still counts)", "a3-nine-separate", None, None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "fixture", "capacity", "expected"), CAPACITY, ids=[c[0] for c in CAPACITY])
def test_more_than_half_is_of_the_nodes_own_chips_and_counts_only_broken_ones(
    case: str, fixture: str, capacity: int | None, expected: str | None
) -> None:
    why = node_unhealthy(report(fixture, capacity=capacity), now=NOW)
    assert (why or "").split(" (")[0] == (expected or "")


def test_a_pre_separated_a3_chip_still_drains_its_own_pod() -> None:
    found = judge_chips(report("a3-nine-preseparate", capacity=16), {"Ascend910-3"}, group_member=False, now=NOW)
    assert found is not None
    assert (found.chip, found.drain, found.node_wide) == ("Ascend910-3", True, False)


def test_a_renamed_resource_is_reported_as_unknown_never_as_no_faults() -> None:
    """deviceNameCustomization.json renames the keys and chips (customname/public_name_config.go:204-230):
    the operator names what it cannot read (the health loop posts it as a ChipReportUnreadable event)."""
    node = report("custom-name")
    assert node.faults == ()
    assert node.problems == (
        "DeviceInfoCfg.DeviceList: resource name huawei.com/MyNPU (renamed by the plugin's "
        "deviceNameCustomization.json) is not huawei.com/Ascend910 or huawei.com/npu: its chips' faults are "
        "unknown to this operator, not read as none",
    )


def cluster_view() -> list[tuple[str, dict[str, str]]]:
    """ClusterD's three ConfigMaps, each's one data key its own name (report.go updateConfig)."""
    return [(name, {name: raw}) for name, raw in data("clusterd-view").items()]


def own(node: str, device: dict[str, str] | None = None, noded: dict[str, str] | None = None) -> NodeReport:
    return replace(node_report(node, device or device_info(), noded), seen=NOW, chips_per_node=8)


def test_clusterds_view_is_read_and_preferred_to_the_raw_reports() -> None:
    """ClusterD knows what the plugin's ConfigMap does not (an isolation made through ClusterD on atlas-1),
    NodeD's status as processed (atlas-1 PreSeparate), and the switches (atlas-2 UnHealthy)."""
    view = read_cluster_view(cluster_view())
    assert view.problems == ()
    assert set(view.devices) == {"atlas-0", "atlas-1"}
    atlas0 = preferred(own("atlas-0"), view)
    found = judge_chips(atlas0, A2, group_member=False, now=NOW)
    assert found is not None
    assert found.message == (
        "chip Ascend910-4 on node atlas-0: fault at level SeparateNPU (codes 80E18402), reported by ClusterD "
        "(mindx-dl/cluster-info-device-*)"
    )
    atlas1 = preferred(own("atlas-1"), view)  # the plugin's own report: no fault at all
    found = judge_chips(atlas1, {"Ascend910-1"}, group_member=False, now=NOW)
    assert found is not None
    assert (found.chip, found.level) == ("Ascend910-1", "ManuallySeparateNPU")
    assert keep_off(atlas1, now=NOW) is not None
    assert (
        node_unhealthy(preferred(own("atlas-2"), view), now=NOW) == "ClusterD reports node atlas-2's switch UnHealthy"
    )
    # cluster-info-node-cm lists only nodes with faults: NodeD's raw UnHealthy of atlas-3 is ClusterD's to judge
    assert preferred(own("atlas-3", noded=node_info("UnHealthy")), view).node_status == "Healthy"


def test_a_chip_separated_by_hand_in_the_plugins_configmap_stays_separated_under_clusterds_view() -> None:
    """ClusterD reads DeviceInfoCfg only (clusterd device/device_util.go:24-46), not the plugin's
    ManuallySeparateNPU key (ascend-device-plugin kubeclient/client_server.go:199-226)."""
    view = read_cluster_view(cluster_view())
    mine = own("atlas-0", {**device_info(), "ManuallySeparateNPU": "Ascend910-6"})
    found = judge_chips(preferred(mine, view), {"Ascend910-6"}, group_member=False, now=NOW)
    assert found is not None
    assert (found.chip, found.level) == ("Ascend910-6", "ManuallySeparateNPU")


def test_without_clusterd_the_raw_reports_decide() -> None:
    view = read_cluster_view([])
    raw = own("atlas-0", device_info(fault(4, "SeparateNPU")), node_info("UnHealthy"))
    assert preferred(raw, view) == raw


@pytest.mark.parametrize(
    ("configmaps", "problem"),
    [
        ([("cluster-info-device-0", {"cluster-info-device-0": "{oops"})],
         "cluster-info-device-0: not ClusterD's JSON object of per-node entries"),
        ([("cluster-info-node-cm", {"cluster-info-node-cm": "[]"})],
         "cluster-info-node-cm: not ClusterD's JSON object of per-node entries"),
    ],
)  # fmt: skip
def test_a_clusterd_configmap_that_does_not_parse_is_a_named_problem(
    configmaps: list[tuple[str, dict[str, str]]], problem: str
) -> None:
    assert read_cluster_view(configmaps).problems == (problem,)


def test_an_empty_clusterd_configmap_means_nothing_to_report() -> None:
    """ClusterD writes "" when it has no entries (report.go:157-183)."""
    view = read_cluster_view([("cluster-info-node-cm", {"cluster-info-node-cm": ""})])
    assert (view.has_nodes, view.node_status, view.problems) == (True, {}, ())
