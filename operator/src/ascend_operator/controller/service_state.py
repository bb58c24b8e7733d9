"""What both loops of one service share in the operator process: the memory between passes and the sink
for events. Its own module so the reconcile loop, the health loop and the disruption step import it
without importing each other."""

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ascend_operator.api.status import AnyEventReason, LiveStatus, Roll
from ascend_operator.autoscale import ScaleHistory
from ascend_operator.controller.rollout_memory import RolloutMemory
from ascend_operator.controller.status import ConditionRecord, PodFault, changed_keys, merge_patch
from ascend_operator.disruption import Candidate


class EventSink(Protocol):
    """Posts a Kubernetes event about the service being reconciled."""

    def __call__(self, type: str, reason: AnyEventReason, message: str) -> None: ...


@dataclass
class ServiceMemory:
    """What one service's reconcile loop remembers between passes (lost on restart, by design)."""

    announced_generation: int | None = None
    live: LiveStatus = field(default_factory=LiveStatus)
    """The status fields the health loop refreshed last: the engine figures (controller/monitor.py) and the
    autoscaler's decision (controller/autoscaling.py); the reconcile loop writes them with its status."""
    overrides: Sequence[ConditionRecord] = ()
    """Conditions that replace a computed one (Degraded/RollDeferred for a refused health roll,
    Progressing/TopologySwitchWaiting)."""
    pod_faults: Mapping[str, PodFault] = field(default_factory=dict)
    """Pod uid -> the health loop's fault verdicts (ConfigMismatch, Stalled)."""
    rolls: list[Roll] = field(default_factory=list)
    """status.rolls as last written by the disruption step (seeded from the stored status on start)."""
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)
    """Deletion candidates by loop ("reconcile", "health"): each loop's latest, decided on together."""
    in_flight: dict[str, int | None] = field(default_factory=dict)
    """Pod uid -> running + waiting requests at the health loop's last scrape (None: no answer)."""
    scraped_at: float | None = None
    """Wall-clock epoch seconds of the health loop's last scrape (the time of `in_flight`)."""
    requests_seen: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Pod uid -> (`scraped_at`, requests finished + running + waiting) at its last answered scrape: the
    count grows by the requests that reached the engine since (a finishing one moves from one term to the
    other, vllm/v1/metrics/loggers.py:676-690, 1185). A client's abort leaves it without being counted as
    finished (vllm/v1/engine/async_llm.py:591-593, aissim/engine.py `abort`): the count drops, and an interval
    with as many aborts as arrivals shows none."""
    arrived: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Pod uid -> (start, end) of the last interval between two scrapes in which requests reached it."""
    unanswered_since: dict[str, float] = field(default_factory=dict)
    """Pod uid -> `scraped_at` of the first of its unanswered scrapes up to the last one (answered: absent)."""
    served: set[str] = field(default_factory=set)
    """Uids of pods the health loop has seen Ready (their startup grace is over)."""
    lost_nodes: frozenset[str] = frozenset()
    """Nodes the health loop's last pass found lost (health/node_loss.py): a group given up for one has its
    members there forced out too."""
    create_failures: dict[str, str] = field(default_factory=dict)
    """Pod name -> the API server's message when it refused this pass's create (quota, admission)."""
    announced_failures: set[str] = field(default_factory=set)
    """Refusal messages already posted as an event: one event per distinct message, not per retry."""
    autoscale: ScaleHistory | None = None
    """spec.autoscaling's window of recent wants (controller/autoscaling.py); None without it."""
    autoscale_asked: int | None = None
    """The spec.replicas the autoscaler last wrote: until the spec shows it, it is not written again."""
    autoscale_seen: int | None = None
    """A P/D pool: its spec.replicas at the last pass (the parent writes it; a change is the pool's last scale)."""
    autoscale_reason: str | None = None
    """The last decision's reason (a hold is announced once, when it starts)."""
    autoscale_scaled_at: str | None = None
    """When the autoscaler last changed spec.replicas (RFC 3339)."""
    autoscale_condition: ConditionRecord | None = None
    """The Autoscaling condition the reconcile loop adds to the status (None without spec.autoscaling)."""
    policy_failed: bool = False
    """The NetworkPolicy could not be made: passes make it before any pod until it exists."""
    live_written_at: float | None = None
    """Monotonic seconds of the last status write (each carries the live engine figures)."""
    written: dict[str, Any] = field(default_factory=dict)
    """The status this process last wrote: newer than kopf's copy of the object until the watch brings
    the write back, so a pass woken meanwhile neither writes it again nor posts its events twice."""
    rollout: RolloutMemory = field(default_factory=RolloutMemory)
    """A judged rollout's revisions, window and verdict (spec.rollout.analysis, controller/rollout.py)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by one disruption decision at a time, so the two loops never decide on the same pods at once."""

    def verdicts(self) -> tuple[object, ...]:
        """What the health loop found that the status shows at once (a change wakes the reconcile loop)."""
        return (dict(self.pod_faults), list(self.overrides), self.rollout.concluded)

    def previous(self, stored: Mapping[str, Any] | None) -> dict[str, Any]:
        """The status as it stands: kopf's copy of the stored one, overlaid with this process's last write."""
        return {**(stored or {}), **self.written}

    def live_due(self, stored: Mapping[str, Any] | None, *, now: float, interval: float) -> bool:
        """Whether the live figures differ from the status as it stands and their last write is `interval`
        seconds old."""
        stale = bool(changed_keys(self.previous(stored), merge_patch(self.live)))
        return stale and (self.live_written_at is None or now - self.live_written_at >= interval)
