"""Status and conditions computed from observations: what `kubectl get ais` and `kubectl wait` show."""

from dataclasses import replace
from typing import Any

from ascend_operator.api.reasons import VerdictReason
from ascend_operator.api.status import AscendInferenceServiceStatus, LiveStatus
from ascend_operator.controller.status import (
    ConditionRecord,
    Observed,
    compute_status,
    condition_events,
    overlay,
    status_changed,
)
from ascend_operator.controller.views import PodView, stored_status


def read_back(status: dict[str, Any]) -> AscendInferenceServiceStatus:
    """A written status as the next pass reads it back (through the model)."""
    return stored_status({"status": status})


T0, T1 = "2026-11-29T10:00:00Z", "2026-11-29T10:05:00Z"


def pod(i: int, *, ready: bool = True, hash: str = "h", unschedulable: str | None = None) -> PodView:
    return PodView(
        name=f"svc-{i}", uid=f"u{i}", replica=i, spec_hash=hash, phase="Running" if ready else "Pending",
        ready=ready, terminating=False, node=None if unschedulable else "atlas-0", ip=None, created=T0,
        unschedulable=unschedulable,
    )  # fmt: skip


def conds(status: dict[str, object]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}  # type: ignore[attr-defined]


def obs(pods: list[PodView], **kw: object) -> Observed:
    return Observed(generation=3, replicas=kw.pop("replicas", 1), spec_hash="h", pods=pods, **kw)  # type: ignore[arg-type]


def test_all_ready() -> None:
    status = compute_status(obs([pod(0)]), previous=None, now=T0)
    assert conds(status) == {
        "Ready": ("True", "AllReplicasReady"),
        "Available": ("True", "ReplicasServing"),
        "Progressing": ("False", "ReplicasUpToDate"),
        "Degraded": ("False", "AsExpected"),
    }
    assert status["readyReplicas"] == 1
    assert status["observedGeneration"] == 3
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])


def test_insufficient_npu_names_the_scheduler_message() -> None:
    message = "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910."
    status = compute_status(obs([pod(0, ready=False, unschedulable=message)]), previous=None, now=T0)
    assert conds(status)["Ready"] == ("False", "InsufficientNPU")
    assert conds(status)["Degraded"] == ("True", "InsufficientNPU")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert message in ready["message"]


def test_invalid_spec_with_no_pods() -> None:
    status = compute_status(
        Observed(generation=2, replicas=1, spec_hash=None, pods=[], errors=["spec.engine: too big [HBMBudget]"]),
        previous=None,
        now=T0,
    )
    assert conds(status) == {
        "Ready": ("False", "InvalidSpec"),
        "Available": ("False", "InvalidSpec"),
        "Progressing": ("False", "InvalidSpec"),
        "Degraded": ("True", "InvalidSpec"),
    }


def test_invalid_new_spec_keeps_old_pods_serving() -> None:
    status = compute_status(
        Observed(generation=4, replicas=1, spec_hash=None, pods=[pod(0, hash="old")], errors=["bad"]),
        previous=None,
        now=T0,
    )
    assert conds(status)["Ready"] == ("True", "ServingPreviousSpec")
    assert conds(status)["Degraded"] == ("True", "InvalidSpec")


def test_rolling_update_is_progressing() -> None:
    status = compute_status(obs([pod(0, hash="old"), pod(1)], replicas=2), previous=None, now=T0)
    assert conds(status)["Progressing"] == ("True", "RollingUpdate")
    assert status["updatedReplicas"] == 1


def test_transition_time_moves_only_when_status_changes() -> None:
    first = compute_status(obs([pod(0, ready=False)]), previous=None, now=T0)
    same = compute_status(obs([pod(0, ready=False)]), previous=read_back(first), now=T1)
    assert same == first
    assert not status_changed(first, same)
    ready = compute_status(obs([pod(0)]), previous=read_back(first), now=T1)
    times = {c["type"]: c["lastTransitionTime"] for c in ready["conditions"]}
    assert times == {"Ready": T1, "Available": T1, "Progressing": T1, "Degraded": T0}
    assert status_changed(first, ready)


def test_overrides_replace_a_computed_condition() -> None:
    o = replace(
        obs([pod(0)]),
        overrides=[ConditionRecord("Degraded", "True", VerdictReason.CONFIG_MISMATCH, "speculative_config=None")],
    )
    assert conds(compute_status(o, previous=None, now=T0))["Degraded"] == ("True", "ConfigMismatch")


def test_events_announce_degradation_and_readiness_once() -> None:
    message = "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910."
    short = compute_status(obs([pod(0, ready=False, unschedulable=message)]), previous=None, now=T0)
    assert condition_events(None, short) == [("Warning", "InsufficientNPU", f"pod svc-0: InsufficientNPU: {message}")]
    assert condition_events(read_back(short), short) == []
    healed = compute_status(obs([pod(0)]), previous=read_back(short), now=T1)
    assert condition_events(read_back(short), healed) == [("Normal", "AllReplicasReady", "1/1 replicas ready")]


LIVE = {"metrics": {"tokensPerSecond": 812.4}, "tokensPerSecondDisplay": "812.4", "kvCacheUsageDisplay": "12.0%"}
LIVE_PART = overlay(AscendInferenceServiceStatus(), LiveStatus.model_validate(LIVE))


def test_live_engine_figures_alone_are_written_at_most_every_interval() -> None:
    from ascend_operator.controller.status import status_due

    first = compute_status(
        Observed(generation=1, replicas=1, spec_hash="h", pods=[pod(0)], extra=LIVE_PART), previous=None, now=T0
    )
    moved = {**first, "metrics": {"tokensPerSecond": 790.1}, "tokensPerSecondDisplay": "790.1"}
    unready = compute_status(
        Observed(generation=1, replicas=1, spec_hash="h", pods=[pod(0, ready=False)], extra=LIVE_PART),
        previous=read_back(first),
        now=T1,
    )
    cases = [  # (stored, new, seconds since the last write, due)
        (first, first, 999.0, False),  # nothing changed
        (first, moved, 10.0, False),  # only the figures, 10 s after the last write
        (first, moved, 30.0, True),  # only the figures, the interval is over
        (first, unready, 1.0, True),  # a condition: at once
        (None, first, None, True),  # the first status
        (first, moved, None, True),  # never written by this operator process
    ]
    for stored, new, age, due in cases:
        at = None if age is None else 100.0 - age
        assert status_due(stored, new, live_written_at=at, now=100.0, live_interval=30.0) is due, (new, age)


def test_the_health_loop_asks_for_a_write_only_when_the_figures_moved_and_are_due() -> None:
    from ascend_operator.controller.service_state import ServiceMemory
    from ascend_operator.controller.status import PodFault

    memory = ServiceMemory(live=LiveStatus.model_validate(LIVE), live_written_at=100.0)
    assert not memory.live_due(LIVE, now=200.0, interval=30.0)  # stored already
    memory.live = overlay(memory.live, LiveStatus(tokens_per_second_display="790.1"))
    assert not memory.live_due(LIVE, now=120.0, interval=30.0)
    assert memory.live_due(LIVE, now=130.0, interval=30.0)
    before = memory.verdicts()
    memory.pod_faults = {"u0": PodFault(VerdictReason.STALLED, "no forward progress for 31s")}
    assert memory.verdicts() != before
