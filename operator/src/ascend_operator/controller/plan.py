"""What the pods of a single-node service should become, from the desired replicas: a pure function.

It says which replicas to create and which pods are deletion candidates; whether and when a candidate goes
is the disruption decision's (`ascend_operator.disruption`: one budget, drain before planned deletions).
- a terminating pod is waited for; its replica slot stays taken (its NPUs are not free yet);
- of two pods of one replica the younger is a `Duplicate`; a pod without a replica label is `ScaleDown`;
- with more replica slots than `replicas`, the slots to give up are, in order: terminating ones (already
  going), one that drains (a removal already under way), pods that are not Ready (they serve nobody), then
  the Ready pod with the fewest running + waiting requests (unknown counts as many), the highest index on a
  tie. They are `ScaleDown` candidates;
- a missing replica is created under the lowest index no pod uses. Pod names stay `<name>-<index>` and
  unique, but after a scale-down the indices need not be 0..replicas-1 (removing `x-0` of two keeps `x-1`);
  a later scale-up fills the lowest free index again;
- every kept pod whose spec hash is stale is a `SpecChanged` candidate (never surge-first: a pod holds a
  whole node's NPUs, so a surge pod would sit Pending; the budget takes them out one at a time).
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ascend_operator.controller.views import PodView
from ascend_operator.disruption import RollReason


@dataclass(frozen=True, kw_only=True)
class CreatePod:
    """Create the pod of one replica."""

    replica: int


@dataclass(frozen=True, kw_only=True)
class DeletePod:
    """A deletion candidate (by name and uid, so a newer pod of the same name is never hit)."""

    name: str
    uid: str
    reason: RollReason


Action = CreatePod | DeletePod


def _removal_order(pod: PodView, in_flight: Mapping[str, int | None]) -> tuple[int, float, int]:
    flight = in_flight.get(pod.uid)
    rank = 0 if pod.terminating else 1 if pod.drain is not None else 2 if not pod.ready else 3
    return (rank, math.inf if flight is None else float(flight), -(pod.replica or 0))


def plan_pods(
    *, replicas: int, spec_hash: str, pods: list[PodView], in_flight: Mapping[str, int | None] | None = None
) -> list[Action]:
    """Creates and deletion candidates; empty when the pods match the spec. `in_flight` is pod uid ->
    running + waiting requests at the health loop's last scrape (scale-down removes the least busy)."""
    flight = in_flight or {}
    actions: list[Action] = []
    slots: dict[int, PodView] = {}
    for pod in sorted(pods, key=lambda p: (p.terminating, p.created or "", p.name)):
        if pod.replica is None:
            if not pod.terminating:
                actions.append(DeletePod(name=pod.name, uid=pod.uid, reason=RollReason.SCALE_DOWN))
        elif pod.replica in slots:
            if not pod.terminating:
                actions.append(DeletePod(name=pod.name, uid=pod.uid, reason=RollReason.DUPLICATE))
        else:
            slots[pod.replica] = pod
    ordered = sorted(slots.values(), key=lambda p: _removal_order(p, flight))
    excess, kept = ordered[: max(0, len(ordered) - replicas)], ordered[max(0, len(ordered) - replicas) :]
    actions += [DeletePod(name=p.name, uid=p.uid, reason=RollReason.SCALE_DOWN) for p in excess if not p.terminating]
    used = {p.replica for p in pods if p.replica is not None}
    free = (i for i in range(len(used) + replicas + 1) if i not in used)
    actions += [CreatePod(replica=next(free)) for _ in range(replicas - len(kept))]
    stale = sorted((p for p in kept if not p.terminating and p.spec_hash != spec_hash), key=lambda p: p.replica or 0)
    actions += [DeletePod(name=p.name, uid=p.uid, reason=RollReason.SPEC_CHANGED) for p in stale]
    return actions
