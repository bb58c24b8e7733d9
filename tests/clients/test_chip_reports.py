"""The device plugin's reports as the operator's caches hold them: read once per write, never stale.

Why: the health loop asks for every serving pod's node each scrape interval, and a report is JSON inside
JSON (DeviceInfoCfg); parsing it per pod and pass costs a fleet's CPU for nothing, since the plugin rewrites
the ConfigMap only on change (or every 5 minutes). A rewrite must be seen at once all the same.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from ascend_operator.clients import chip_reports
from ascend_operator.clients.chip_reports import ChipReports, NodeLabels
from ascend_operator.contract.mindcluster import DEVICE_INFO_NAMESPACE, DEVICE_INFO_PREFIX
from ascend_operator.health.chips import judge_chips, stale
from tests.health.test_chips import device_info, fault
from tests.health.test_mindcluster import data


def configmap(version: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": DEVICE_INFO_NAMESPACE,
            "name": f"{DEVICE_INFO_PREFIX}node-a",
            "resourceVersion": version,
            "labels": {"mx-consumer-cim": "true"},
        },
        "data": data,
    }


def test_a_report_is_parsed_once_per_write_and_a_rewrite_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    real = chip_reports.node_report  # type: ignore[attr-defined]

    def counting(node: str, *data: Any) -> Any:
        parsed.append(node)
        return real(node, *data)

    monkeypatch.setattr(chip_reports, "node_report", counting)
    reports = ChipReports(client.ApiClient())
    reports._informers = [SimpleNamespace(synced=True)]  # type: ignore[list-item]  # listed: nothing to watch here
    reports.store.put(configmap("1", device_info()))
    first = reports.report("node-a")
    assert first is not None
    assert first.faults == ()
    assert reports.report("node-a") == first
    assert parsed == ["node-a"]  # the second pass read no JSON

    reports.store.put(configmap("2", device_info(fault(4, "SeparateNPU"))))
    second = reports.report("node-a")
    assert second is not None
    assert [(f.chip, f.level) for f in second.faults] == [("Ascend910-4", "SeparateNPU")]
    assert parsed == ["node-a", "node-a"]


class Clock:
    """This operator's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 5_000_000.0

    def __call__(self) -> float:
        return self.now


def synced(clock: Clock, capacity: dict[str, int] | None = None) -> ChipReports:
    reports = ChipReports(client.ApiClient(), capacity=(capacity or {}).get, clock=clock)
    reports._informers = [SimpleNamespace(synced=True)]  # type: ignore[list-item]  # listed: nothing to watch here
    return reports


def test_staleness_is_timed_by_this_operators_clock_from_when_it_saw_the_report_change() -> None:
    """The node's clock is 16 minutes off this operator's (UpdateTime, set at device/ascendcommon.go:430, is
    the node's `time.Now()`): its report is believed while it keeps changing, and a plugin that stops
    rewriting it goes stale 15 minutes after the operator last saw it change, whatever UpdateTime says."""
    clock = Clock()
    reports = synced(clock)
    reports.store.put(configmap("1", device_info(fault(4, "SeparateNPU"), age=960)))  # UpdateTime 16 min behind
    first = reports.report("node-a")
    assert first is not None
    assert first.seen == clock.now
    assert judge_chips(first, {"Ascend910-4"}, group_member=False, now=clock.now) is not None
    clock.now += 840
    later = reports.report("node-a")
    assert later is not None
    assert stale(later, now=clock.now) is None  # unchanged for 14 min: late, not gone
    clock.now += 120
    gone = reports.report("node-a")
    assert gone is not None
    assert stale(gone, now=clock.now) is not None  # unchanged for 16 min: the plugin stopped
    assert judge_chips(gone, {"Ascend910-4"}, group_member=False, now=clock.now) is None
    reports.store.put(configmap("2", device_info(fault(4, "SeparateNPU"), age=0)))  # its 5-minute rewrite
    back = reports.report("node-a")
    assert back is not None
    assert back.seen == clock.now
    assert judge_chips(back, {"Ascend910-4"}, group_member=False, now=clock.now) is not None


def test_the_nodes_capacity_sets_the_bar_for_more_than_half() -> None:
    clock = Clock()
    reports = synced(clock, capacity={"node-a": 16})
    reports.store.put(configmap("1", data("a3-five-separate")))
    report = reports.report("node-a")
    assert report is not None
    assert report.chips_per_node == 16
    found = judge_chips(report, {"Ascend910-0"}, group_member=False, now=clock.now)
    assert found is not None
    assert not found.node_wide  # 5 of 16, not "more than half of 8"


def test_clusterds_view_is_watched_and_preferred() -> None:
    """ClusterD's ConfigMaps (mindx-dl, label mx-consumer-volcano=true) name nodes the plugin's do not reach
    here, and replace what the plugin's own ConfigMap says of a node."""
    clock = Clock()
    reports = synced(clock)
    reports.store.put(configmap("1", device_info()))  # node-a: the plugin says healthy
    for i, (name, raw) in enumerate(data("clusterd-view").items()):
        meta = {"namespace": "mindx-dl", "name": name, "resourceVersion": str(i + 1)}
        reports.cluster.put({"metadata": meta | {"labels": {"mx-consumer-volcano": "true"}}, "data": {name: raw}})
    assert [r.node for r in reports.reports()] == ["atlas-0", "atlas-1", "atlas-2", "node-a"]
    atlas0 = reports.report("atlas-0")
    assert atlas0 is not None
    assert atlas0.source.startswith("ClusterD")
    assert atlas0.seen == clock.now
    assert [(f.chip, f.level) for f in atlas0.faults] == [("Ascend910-4", "SeparateNPU")]
    atlas1 = reports.report("atlas-1")
    assert atlas1 is not None
    assert atlas1.node_status == "PreSeparate"
    plain = reports.report("node-a")
    assert plain is not None
    assert (plain.source, plain.faults) == ("the Ascend device plugin", ())


def test_a_nodes_npus_come_from_its_capacity_and_only_labelled_nodes_have_driver_facts() -> None:
    """Every node is watched (KWOK's and unlabelled ones count for the fault rules); the fitness facts stay
    those of the nodes the plugin labelled with a driver version."""
    labels = NodeLabels(client.ApiClient())
    a3 = {"capacity": {"huawei.com/Ascend910": "16"}, "allocatable": {"huawei.com/Ascend910": "14"}}
    labels.store.put({"metadata": {"name": "a3", "labels": {"huawei.com/driver.version": "25.5.1"}}, "status": a3})
    labels.store.put({"metadata": {"name": "a5"}, "status": {"allocatable": {"huawei.com/npu": "8"}}})
    labels.store.put({"metadata": {"name": "cpu"}, "status": {"capacity": {"cpu": "64"}}})
    assert [labels.capacity(n) for n in ("a3", "a5", "cpu", "gone")] == [16, 8, None, None]
    assert [name for name, _ in labels.labels()] == ["a3"]
