"""A multi-node group judged as one: a worker that is gone makes the whole group's verdict, by name.

Why: the operator scrapes and canaries only a group's leader (workers run `--headless`, with no HTTP),
and a lost worker does not always show there in time: while a worker pod is gone its ranks' series on
the leader just stop moving, and a dense model's other ranks keep advancing. The pods themselves say
it at once, so the group's verdict reads them too. Pure: pod views in (anything with the fields of
`Member`, as controller/views.py `PodView` has them), an observation out; the judge's `WorkerGone`
rule (health/judge.py) makes it the leader's verdict, which sets the leader's readiness gate and may ask
for the group's roll (deleting the leader recreates the group: render/lws.py, RecreateGroupOnPodRestart).

Facts of sigs.k8s.io/lws v0.7.0 this relies on:
- a group's workers are the pods `<leader>-1 .. <leader>-(size-1)` of a StatefulSet named after the
  leader pod, ordinals from 1 (pkg/controllers/pod_controller.go:352-358);
- with RecreateGroupOnPodRestart, LWS itself deletes the leader when any pod of the group has a
  deletionTimestamp or a container with restarts (pod_controller.go:201-238, pkg/utils/pod/pod_utils.go:
  29-50). In those cases a roll of the operator's would be a second deletion: the verdict says LWS is
  recreating the group and asks for none. A pod that vanished without a terminating phase the pod
  controller saw (a force delete), a worker stuck Pending or Failed, or a node gone (phase Unknown) are
  not caught by that rule: a new worker cannot join a data-parallel group that formed without it (the
  leader's frontend waits for every rank's handshake once, vllm/v1/engine/core_client.py:615-633), so
  the operator rolls the group, through the same roll policy as a stalled pod.
During the group's start (the leader never served), workers that are not there yet or still Pending are
the start itself, not a fault; only a definite loss (deleted, failed, restarted, node lost) counts.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ascend_operator.api.spec import AscendInferenceServiceSpec

#: Pod phases after which the container does not run again (or whose node stopped reporting).
ENDED_PHASES = frozenset({"Failed", "Succeeded", "Unknown"})


class Member(Protocol):
    """The fields of a group's pod the verdict reads (controller/views.py PodView has them)."""

    @property
    def name(self) -> str: ...
    @property
    def replica(self) -> int | None: ...
    @property
    def worker_index(self) -> int | None: ...
    @property
    def phase(self) -> str: ...
    @property
    def ready(self) -> bool: ...
    @property
    def terminating(self) -> bool: ...
    @property
    def restarts(self) -> int: ...
    @property
    def waiting(self) -> tuple[str, str] | None: ...


@dataclass(frozen=True, kw_only=True)
class MissingWorker:
    """A worker of the group that is not running its engine."""

    index: int
    name: str
    why: str
    definite: bool
    """Lost for sure (deleted, ended, restarted), so it counts during the group's start too."""
    lws_recreates: bool
    """LWS's own RecreateGroupOnPodRestart rule already deletes the leader for it."""


@dataclass(frozen=True, kw_only=True)
class GroupObservation:
    """What a group's pods say besides the leader's own engine."""

    leader: str
    size: int
    local_ranks: int
    """DP ranks per node (`--data-parallel-size-local`): rank r runs on worker r // local_ranks."""
    missing: tuple[MissingWorker, ...] = ()


def worker_name(leader: str, index: int) -> str:
    """A worker pod's name: `<leader>-<index>` (LWS's worker StatefulSet is named after the leader)."""
    return f"{leader}-{index}"


def _why(pod: Member) -> tuple[str, bool, bool] | None:
    """(why, definite, lws_recreates) for a worker pod that does not run its engine, None when it does."""
    if pod.terminating:
        return "is being deleted", True, True
    if pod.restarts > 0:
        return f"restarted its engine container {pod.restarts} time(s)", True, True
    if pod.phase in ENDED_PHASES:
        return f"is {pod.phase}", True, False
    waiting = f" ({pod.waiting[0]}: {pod.waiting[1]})" if pod.waiting and pod.waiting[1] else ""
    waiting = waiting or (f" ({pod.waiting[0]})" if pod.waiting else "")
    if pod.phase != "Running":
        return f"is {pod.phase}{waiting}", False, False
    if not pod.ready:
        return f"runs no engine container{waiting}", False, False
    return None


def observe_group(leader: Member, pods: Sequence[Member], *, size: int, local_ranks: int) -> GroupObservation:
    """The group of `leader` among `pods` (any of the service's pods): which of its `size - 1` workers
    are missing or not running their engine, and why."""
    workers: dict[int, Member] = {}
    for pod in pods:
        if pod.replica == leader.replica and pod.worker_index not in (None, 0):
            index = pod.worker_index or 0
            # a replacement beside a terminating pod of the same index: the live one says more
            if index not in workers or workers[index].terminating:
                workers[index] = pod
    missing = []
    for index in range(1, size):
        name = worker_name(leader.name, index)
        worker = workers.get(index)
        if worker is None:
            missing.append(MissingWorker(index=index, name=name, why="has no pod", definite=False, lws_recreates=False))
        elif (found := _why(worker)) is not None:
            why, definite, lws = found
            missing.append(MissingWorker(index=index, name=worker.name, why=why, definite=definite, lws_recreates=lws))
    return GroupObservation(leader=leader.name, size=size, local_ranks=local_ranks, missing=tuple(missing))


def observe(pod: Member, pods: Sequence[Member], spec: AscendInferenceServiceSpec) -> GroupObservation | None:
    """The monitor's one call per judged pod: the group observation of a leader (`pods`: every pod of the
    service, workers included), None for a single-node pod."""
    nodes = spec.parallelism.nodes
    if nodes <= 1 or pod.worker_index != 0:
        return None
    return observe_group(pod, pods, size=nodes, local_ranks=spec.parallelism.data // nodes)


def rank_owners(ranks: Sequence[str], *, leader: str, local_ranks: int) -> dict[str, list[str]]:
    """Which pod runs each DP rank: worker w holds ranks w*local .. (w+1)*local - 1 (render/group.py
    worker_start_rank), the leader ranks 0 .. local - 1. Pod name -> its ranks, in rank order."""
    owners: dict[str, list[str]] = {}
    for rank in ranks:
        if not rank.isdigit() or local_ranks <= 0:
            continue
        index = int(rank) // local_ranks
        owners.setdefault(leader if index == 0 else worker_name(leader, index), []).append(rank)
    return owners


@dataclass(frozen=True, kw_only=True)
class Gone:
    """The workers of a group that are gone, as the group's verdict names them."""

    message: str
    count: float
    lws_recreates: bool
    """Every gone worker is one LWS's RecreateGroupOnPodRestart already recreates the group for."""


def gone_workers(group: GroupObservation, *, served: bool) -> Gone | None:
    """The group's gone workers (any missing one once the leader has served; before, only definite
    losses), None when none is."""
    gone = [w for w in group.missing if w.definite or served]
    if not gone:
        return None
    lws = all(w.lws_recreates for w in gone)
    names = "; ".join(f"worker {w.name} {w.why}" for w in gone)
    tail = " (LeaderWorkerSet recreates the group)" if lws else ""
    message = f"group of {group.leader}: {names}; its ranks cannot progress{tail}"
    return Gone(message=message, count=float(len(gone)), lws_recreates=lws)


def name_ranks(message: str, ranks: Sequence[str], group: GroupObservation) -> str:
    """A stall message with each stalled rank named with the pod that runs it."""
    owners = rank_owners(ranks, leader=group.leader, local_ranks=group.local_ranks)
    where = ", ".join(f"rank{'s' if len(r) > 1 else ''} {', '.join(r)} on {pod}" for pod, r in owners.items())
    return f"{message}; {where}" if where else message
