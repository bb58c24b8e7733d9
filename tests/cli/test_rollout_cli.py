"""`aisctl rollout` output and the undo patch, from a service and its ControllerRevisions as the API
server returns them."""

from typing import Any

import pytest

from ascend_operator.cli.rollout import EXIT_ROLLED_BACK, history_lines, status_lines, undo_patch


def revision(number: int, digest: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": f"svc-{digest}"}, "revision": number, "data": {"replicas": 1, **spec}}


REVISIONS = [revision(1, "aaa", image="v1"), revision(2, "bbb", image="v2")]


def service(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "svc"}, "spec": {"replicas": 3, "image": "v2"}, "status": status}


ROLLED_BACK = service(
    currentRevision="svc-aaa",
    updateRevision="svc-bbb",
    rollout={
        "phase": "RolledBack",
        "revision": "bbb",
        "signal": "TTFT",
        "canaryValue": 4.2,
        "baselineValue": 0.31,
        "comparedWith": "replicas",
        "message": "TTFT p90 4.200 s on the new replica against 0.310 s",
    },
)


def test_status_of_a_rolled_back_change_names_the_signal_and_both_values() -> None:
    lines, code = status_lines(ROLLED_BACK)
    assert code == EXIT_ROLLED_BACK
    assert "svc-bbb rolled back to svc-aaa" in lines[0]
    assert "signal TTFT: new revision 4.2 against 0.31" in lines[1]


def test_status_of_a_complete_and_a_progressing_rollout() -> None:
    assert status_lines(service(currentRevision="svc-bbb", updateRevision="svc-bbb")) == (
        ['service "svc" successfully rolled out (revision svc-bbb)'],
        0,
    )
    going = service(
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-bbb", "replicas": 2, "readyReplicas": 1}],
        rollout={"phase": "Progressing", "revision": "bbb"},
    )
    assert status_lines(going) == (["Waiting for rollout to finish: 1 of 3 updated replicas are available..."], 0)


def test_history_marks_current_update_and_rolled_back() -> None:
    lines = history_lines(REVISIONS, ROLLED_BACK)
    assert lines[0].split() == ["REVISION", "NAME", "STATUS"]
    assert lines[1].split() == ["1", "svc-aaa", "current"]
    assert lines[2].split(None, 2) == ["2", "svc-bbb", "update, rolled back (TTFT)"]


def test_undo_writes_the_current_revision_back_keeping_replicas() -> None:
    patch, name = undo_patch(REVISIONS, ROLLED_BACK)
    assert name == "svc-aaa"
    assert patch == [{"op": "replace", "path": "/spec", "value": {"replicas": 3, "image": "v1"}}]


def test_undo_after_a_complete_rollout_goes_to_the_one_before() -> None:
    done = service(currentRevision="svc-bbb", updateRevision="svc-bbb")
    assert undo_patch(REVISIONS, done)[1] == "svc-aaa"
    assert undo_patch(REVISIONS, done, to_revision=2)[1] == "svc-bbb"
    with pytest.raises(LookupError):
        undo_patch(REVISIONS, done, to_revision=7)
    with pytest.raises(LookupError):
        undo_patch(REVISIONS[1:], done)
