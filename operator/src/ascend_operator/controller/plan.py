"""Decide what to do next from the desired replicas and the pods that exist: a pure function.

The rules, in order:
- a pod that is terminating is waited for; its replica slot stays taken (its NPUs are not free yet);
- pods beyond `replicas` (or without a replica label) are deleted;
- a missing replica is created;
- a pod whose spec hash is stale is replaced delete-then-create, never surge-first: it holds a whole
  node's NPUs, so a surge pod would sit Pending. A stale pod that is not Ready serves nobody and is
  replaced at once; a stale Ready pod only when every other replica is Ready and current, so at most one
  replica is ever out of service for a spec change.
"""

from dataclasses import dataclass
from enum import StrEnum

from ascend_operator.controller.views import PodView


class Reason(StrEnum):
    """Why a pod is deleted (recorded in events)."""

    SCALE_DOWN = "ScaleDown"
    SPEC_CHANGED = "SpecChanged"
    DUPLICATE = "Duplicate"


@dataclass(frozen=True, kw_only=True)
class CreatePod:
    """Create the pod of one replica."""

    replica: int


@dataclass(frozen=True, kw_only=True)
class DeletePod:
    """Delete one pod (by name and uid, so a newer pod of the same name is never hit)."""

    name: str
    uid: str
    reason: Reason


Action = CreatePod | DeletePod


def plan_pods(*, replicas: int, spec_hash: str, pods: list[PodView]) -> list[Action]:
    """The next actions; empty when the pods match the spec."""
    actions: list[Action] = []
    by_replica: dict[int, PodView] = {}
    for pod in sorted(pods, key=lambda p: (p.terminating, p.created or "", p.name)):
        if pod.replica is None or pod.replica >= replicas:
            if not pod.terminating:
                actions.append(DeletePod(name=pod.name, uid=pod.uid, reason=Reason.SCALE_DOWN))
        elif pod.replica in by_replica:
            if not pod.terminating:
                actions.append(DeletePod(name=pod.name, uid=pod.uid, reason=Reason.DUPLICATE))
        else:
            by_replica[pod.replica] = pod
    actions += [CreatePod(replica=i) for i in range(replicas) if i not in by_replica]

    live = [p for p in by_replica.values() if not p.terminating]
    stale = sorted((p for p in live if p.spec_hash != spec_hash), key=lambda p: p.replica or 0)
    actions += [DeletePod(name=p.name, uid=p.uid, reason=Reason.SPEC_CHANGED) for p in stale if not p.ready]
    all_serving = len(live) == replicas and all(p.ready for p in live)
    if all_serving and stale:
        first = stale[0]
        actions.append(DeletePod(name=first.name, uid=first.uid, reason=Reason.SPEC_CHANGED))
    return actions
