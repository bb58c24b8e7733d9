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
from ascend_operator.clients.chip_reports import ChipReports
from ascend_operator.health.chips import DEVICE_INFO_NAMESPACE, DEVICE_INFO_PREFIX
from tests.health.test_chips import device_info, fault


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
    assert reports.report("node-a") is first
    assert parsed == ["node-a"]  # the second pass read no JSON

    reports.store.put(configmap("2", device_info(fault(4, "SeparateNPU"))))
    second = reports.report("node-a")
    assert second is not None
    assert [(f.chip, f.level) for f in second.faults] == [("Ascend910-4", "SeparateNPU")]
    assert parsed == ["node-a", "node-a"]
