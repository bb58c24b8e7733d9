"""A service's stored status is read back through its model (controller/views.py `stored_status`): what the
operator wrote comes back typed, and one field an older operator or a hand edit left malformed costs that
field only, never the rest (a P/D parent still sees its role's readiness and decision)."""

import logging
from typing import Any

import pytest

from ascend_operator.api.autoscaling import ScaleReason
from ascend_operator.controller.views import stored_status

ROLE: dict[str, Any] = {
    "metadata": {"name": "svc-decode"},
    "status": {
        "replicas": 2,
        "readyReplicas": 1,
        "conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForReplicas", "message": "1/2"}],
        "autoscaling": {"desiredReplicas": 3, "currentReplicas": 2, "reason": "ScaledUp", "message": "2 -> 3"},
    },
}


def test_the_status_the_operator_wrote_comes_back_typed() -> None:
    status = stored_status(ROLE)
    assert (status.replicas, status.ready_replicas) == (2, 1)
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [("Ready", "False", "WaitingForReplicas")]
    assert status.autoscaling is not None
    assert (status.autoscaling.desired_replicas, status.autoscaling.reason) == (3, ScaleReason.SCALE_UP)


def test_a_malformed_field_is_left_out_with_a_warning_and_the_rest_counts(caplog: pytest.LogCaptureFixture) -> None:
    body = {**ROLE, "status": {**ROLE["status"], "autoscaling": {"desiredReplicas": "many"}, "fromTheFuture": 1}}
    with caplog.at_level(logging.WARNING):
        status = stored_status(body)
    assert status.autoscaling is None
    assert (status.ready_replicas, status.conditions[0].reason) == (1, "WaitingForReplicas")
    left_out = sorted(r.getMessage().split(" of ")[0] for r in caplog.records)
    assert left_out == ["status.autoscaling", "status.fromTheFuture"]


def test_of_a_list_only_the_malformed_item_is_left_out() -> None:
    bad = {"type": "Available", "status": "Maybe", "reason": "x"}
    body = {**ROLE, "status": {**ROLE["status"], "conditions": [*ROLE["status"]["conditions"], bad]}}
    assert [c.type for c in stored_status(body).conditions] == ["Ready"]


def test_no_object_or_no_status_reads_as_the_empty_status() -> None:
    assert stored_status(None).replicas == 0
    assert stored_status({"metadata": {"name": "new"}}).conditions == []
