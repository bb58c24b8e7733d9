"""Why a replica does not serve: the first blocking cause of each replica, from what was observed. Pure.

`WaitingForReplicas` for an image that cannot be pulled, a mount that fails and an engine that crashes
alike tells a user nothing; the kubelet, the scheduler and the operator's own health checks already say
what is wrong, so the status repeats their words. Per replica the cause is the first of, in the order a
pod gets stuck: being deleted (Draining), not placed (InsufficientNPU / Unschedulable, with the
scheduler's message), a volume that does not mount (FailedMount, from the pod's events: the pod status
only says ContainerCreating), a container the kubelet cannot start or keeps restarting (its waiting
reason and message, CrashLoopBackOff with the restart count and the last exit), then the health verdict
when it is a fault (the judge chain's `fault` rules, health/judge.py: NodeUnhealthy, NPUFault, WorkerGone,
ConfigMismatch, Stalled).
A replica whose pod the API server refused to create (ResourceQuota, admission,
Pod Security) is PodCreateFailed with the server's message. Across replicas the most serious cause names
the service's reason.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.reasons import KubeletReason, Relayed, ReplicaReason, VerdictReason
from ascend_operator.controller.views import PodView
from ascend_operator.health.judge import FAULTS

#: What a replica's cause may be: the operator's own words, a health verdict, or the kubelet's (repeated).
CauseReason = ReplicaReason | VerdictReason | KubeletReason | Relayed

#: Container waiting reasons the kubelet reports for a container that cannot start, by how much they say
#: about a fault the user has to fix (kubelet: pkg/kubelet/images/types.go ErrImagePullBackOff,
#: ErrImagePull, ErrInvalidImageName; pkg/kubelet/container/sync_result.go CrashLoopBackOff,
#: CreateContainerConfigError, CreateContainerError, RunContainerError).
CONTAINER_FAULTS = tuple(KubeletReason)
#: Every cause, most serious first; the service's reason is the first one any replica has. The health
#: verdicts that are faults come first, in the judge chain's order (health/judge.py `FAULTS`).
SEVERITY = (
    *FAULTS,
    *CONTAINER_FAULTS,
    ReplicaReason.POD_CREATE_FAILED,
    ReplicaReason.FAILED_MOUNT,
    ReplicaReason.INSUFFICIENT_NPU,
    ReplicaReason.UNSCHEDULABLE,
    ReplicaReason.DRAINING,
    ReplicaReason.WAITING_FOR_REPLICAS,
)
#: Causes that are not a fault but a step on the way (a deletion, a pod still loading its engine):
#: they hold Ready back without making the service Degraded.
TRANSIENT = frozenset({ReplicaReason.DRAINING, ReplicaReason.WAITING_FOR_REPLICAS})
#: Waiting reasons that are the normal way to a running container, not causes of their own.
STARTING = frozenset({"ContainerCreating", "PodInitializing"})


@dataclass(frozen=True, kw_only=True)
class Cause:
    """Why one replica does not serve."""

    pod: str
    reason: CauseReason
    message: str

    @property
    def fault(self) -> bool:
        """Something the user has to fix (rather than wait for)."""
        return self.reason not in TRANSIENT

    def __str__(self) -> str:
        return f"pod {self.pod}: {self.reason}: {self.message}" if self.message else f"pod {self.pod}: {self.reason}"


def pod_cause(
    pod: PodView, *, mount_failure: str | None = None, health: tuple[VerdictReason, str] | None = None
) -> Cause | None:
    """The first blocking cause of one pod; None when it serves (Ready) and nothing is wrong.

    `mount_failure` is the message of the pod's latest FailedMount event, `health` the operator's
    (reason, message) verdict when it is a fault (health/judge.py `FAULTS`).
    """
    if pod.terminating:
        return Cause(pod=pod.name, reason=ReplicaReason.DRAINING, message="the pod is being deleted")
    if pod.drain is not None:
        why = pod.drain.get("reason", "")
        return Cause(
            pod=pod.name, reason=ReplicaReason.DRAINING, message=f"out of the Service, waiting for its requests ({why})"
        )
    if pod.unschedulable is not None:
        reason = ReplicaReason.INSUFFICIENT_NPU if pod.lacks_npus else ReplicaReason.UNSCHEDULABLE
        return Cause(pod=pod.name, reason=reason, message=pod.unschedulable)
    waiting = pod.waiting
    if mount_failure is not None and (waiting is None or waiting[0] in STARTING) and pod.phase == "Pending":
        return Cause(pod=pod.name, reason=ReplicaReason.FAILED_MOUNT, message=mount_failure)
    if waiting is not None and waiting[0] not in STARTING:
        said, message = waiting
        if said == KubeletReason.CRASH_LOOP_BACK_OFF:
            ended = f", last run: {pod.last_exit}" if pod.last_exit else ""
            detail = f": {message}" if message else ""
            message = f"restarted {pod.restarts} time(s){ended}{detail}"
        return Cause(pod=pod.name, reason=Relayed(said), message=message)
    if health is not None:
        return Cause(pod=pod.name, reason=health[0], message=health[1])
    if pod.ready:
        return None
    detail = f"container {waiting[0]}" if waiting is not None else f"phase {pod.phase}, the engine is not serving yet"
    return Cause(pod=pod.name, reason=ReplicaReason.WAITING_FOR_REPLICAS, message=detail)


def _event_time(event: Mapping[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


#: The field selector of the events `mount_failures` reads: a pod's FailedMount events only.
FAILED_MOUNT_EVENTS = "involvedObject.kind=Pod,reason=FailedMount"


def mount_failures(events: Sequence[Mapping[str, Any]], pods: Sequence[PodView]) -> dict[str, str]:
    """Pod name -> message of its latest FailedMount event (core v1 events as the API returns them).

    Events are matched by the pod's uid, so an event about an earlier pod of the same name (a replaced
    replica) never blames the new one.
    """
    by_uid = {p.uid: p.name for p in pods}
    latest: dict[str, tuple[str, str]] = {}
    for event in events:
        obj = event.get("involvedObject") or {}
        name = by_uid.get(str(obj.get("uid") or ""))
        if name is None or event.get("reason") != "FailedMount":
            continue
        stamp = _event_time(event)
        if name not in latest or stamp >= latest[name][0]:
            latest[name] = (stamp, str(event.get("message") or ""))
    return {name: message for name, (_, message) in latest.items()}


def may_fail_mount(pod: PodView) -> bool:
    """A pod whose events are worth reading: bound, not started, nothing else said why."""
    return pod.phase == "Pending" and pod.node is not None and (pod.waiting is None or pod.waiting[0] in STARTING)


def _rank(cause: Cause) -> int:
    return (
        SEVERITY.index(cause.reason) if cause.reason in SEVERITY else SEVERITY.index(KubeletReason.RUN_CONTAINER_ERROR)
    )


def replica_causes(
    pods: Sequence[PodView],
    *,
    service: str,
    replicas: int,
    mount_failures: Mapping[str, str],
    health: Mapping[str, tuple[VerdictReason, str]],
    create_failures: Mapping[str, str] | None = None,
) -> list[Cause]:
    """The cause of every replica that does not serve, in replica order, plus terminating pods.

    `mount_failures` is keyed by pod name, `health` by pod uid (a replaced replica keeps its name, and
    must not inherit the verdict of the pod it replaces). A replica without any pod waits for the operator
    to create it (named by the lowest free index, as the operator names it); a pod that is
    being removed by a scale-down shows while it drains or terminates.
    """
    causes: list[Cause] = []
    live = [p for p in pods if not p.terminating]
    for pod in pods:
        cause = pod_cause(pod, mount_failure=mount_failures.get(pod.name), health=health.get(pod.uid))
        if cause is not None:
            causes.append(cause)
    used = {p.replica for p in pods if p.replica is not None}
    free = (i for i in range(len(used) + replicas + 1) if i not in used)  # the names the operator creates next
    refused = create_failures or {}
    for _ in range(replicas - len({p.replica for p in live})):
        name = f"{service}-{next(free)}"
        if name in refused:  # the API server's own words: the quota or admission rule that said no
            causes.append(Cause(pod=name, reason=ReplicaReason.POD_CREATE_FAILED, message=refused[name]))
        else:
            causes.append(Cause(pod=name, reason=ReplicaReason.WAITING_FOR_REPLICAS, message="not created yet"))
    return causes


def worst(causes: Sequence[Cause], *, faults_only: bool = False) -> Cause | None:
    """The most serious cause (the first of its kind in replica order)."""
    pool = [c for c in causes if c.fault] if faults_only else list(causes)
    return min(pool, key=_rank) if pool else None


def summary(causes: Sequence[Cause], first: Cause) -> str:
    """`first` in full, then how many other replicas are blocked and by what."""
    others = [c for c in causes if c is not first]
    if not others:
        return str(first)
    rest = ", ".join(f"{c.pod} {c.reason}" for c in others)
    return f"{first}; also {rest}"
