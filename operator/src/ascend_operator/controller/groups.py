"""The groups of a multi-node service, from its pods: their status, and what a pass asks of them.

Pure. A group is one replica: its leader serves and is judged; the status (`GroupStatus` of api/status.py)
also says whether every worker is there and on which nodes the group runs, so `kubectl get ais -o yaml`
shows a group that is short of a worker (Pending for NPUs, or being recreated) without listing pods.

The plans say how big the LeaderWorkerSet is and which pods are deletion candidates when the spec
switches between one node and several per replica (spec.parallelism.nodes) or scales groups down: every
such deletion goes through the disruption decision (controller/deletions.py), with its budget and drain,
instead of deleting every single-node pod or the whole set at once.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ascend_operator.api.status import GroupStatus
from ascend_operator.controller.views import PodView
from ascend_operator.disruption import Candidate, RollReason


def group_status(pods: list[PodView], *, size: int) -> list[GroupStatus]:
    """`status.groups`: index, leader pod, Ready (the leader's verdict), pods present of `size`, nodes."""
    groups: dict[int, list[PodView]] = {}
    for pod in pods:
        if pod.replica is not None and pod.worker_index is not None and not pod.terminating:
            groups.setdefault(pod.replica, []).append(pod)
    out = []
    for index in sorted(groups):
        members = sorted(groups[index], key=lambda p: p.worker_index or 0)
        leader = next((p for p in members if p.worker_index == 0), None)
        out.append(
            GroupStatus(
                index=index,
                leader=leader.name if leader else "",
                ready=bool(leader and leader.ready),
                pods=f"{len(members)}/{size}",
                nodes=[p.node for p in members if p.node],
            )
        )
    return out


@dataclass(frozen=True, kw_only=True)
class GroupPlan:
    """What a multi-node spec asks of the pods this pass, while single-node pods may still serve."""

    lws_replicas: int
    """spec.replicas of the LeaderWorkerSet: grows at once, shrinks only by the disruption decision."""
    candidates: list[Candidate]
    """Single-node pods making way for groups (TopologyChanged) and the highest excess group (ScaleDown)."""


def _live_leaders(pods: Sequence[PodView]) -> dict[int, PodView]:
    return {p.replica: p for p in pods if p.worker_index == 0 and p.replica is not None and not p.terminating}


def _excess_leader(leaders: Mapping[int, PodView], keep: int) -> PodView | None:
    """The leader of the highest group at or above `keep`: LWS removes groups from the top."""
    above = [i for i in leaders if i >= keep]
    return leaders[max(above)] if above else None


def _arriving(members: Sequence[PodView], *, expected: int) -> bool:
    """A replica of the new shape is on its way: its pods are still to be made, or they load on NPUs they
    got. Not when it serves already, nor when the scheduler found no NPUs for it (room must be made)."""
    live = [p for p in members if not p.terminating]
    if any(p.lacks_npus for p in live):
        return False
    serving = [p for p in live if p.worker_index in (None, 0) and p.ready]
    return not serving or len(live) < expected


def plan_groups(*, replicas: int, nodes: int, npus: int, pods: Sequence[PodView], current: int | None) -> GroupPlan:
    """The LeaderWorkerSet's size and the deletion candidates of a multi-node spec.

    Single-node pods left by a switch from one node hold the NPUs the groups need: each is a
    TopologyChanged candidate, so the budget drains and deletes them one decision at a time, and the set
    grows to the replicas the remaining pods leave room for (at least one group, which starts at once on
    NPUs that are free). While a group is on its way on NPUs it got, no single-node pod is nominated: the
    old shape serves until the new one does, and only a group the scheduler finds no NPUs for makes a
    single-node pod go. A set larger than spec.replicas keeps its groups until the decision removed
    the top one (drained through its leader, then the set shrinks), so a scale-down drains too.
    """
    plain = [p for p in pods if p.worker_index is None and not p.terminating]
    want = min(replicas, max(1, replicas - len(plain))) if replicas > 0 else 0
    leaders = _live_leaders(pods)
    top = _excess_leader(leaders, want)
    size = want if current is None or current <= want or top is None else min(current, (top.replica or 0) + 1)
    message = (
        f"the service now spans {nodes} nodes per replica: each group needs {nodes} nodes with {npus} free NPUs, "
        "which single-node pods hold"
    )
    # a group that loads on free NPUs serves sooner than one that waits for a drained pod's: wait for it
    grouped = [p for p in pods if p.worker_index is not None]
    arriving = current is None or any(
        _arriving([p for p in grouped if p.replica == i], expected=nodes) for i in range(size)
    )
    candidates = [
        Candidate(pod=p.name, uid=p.uid, reason=RollReason.TOPOLOGY_CHANGED, message=message)
        for p in plain
        if not arriving
    ]
    if top is not None and size > want:
        why = f"{size} groups for {replicas} replicas: the top group goes"
        candidates.append(Candidate(pod=top.name, uid=top.uid, reason=RollReason.SCALE_DOWN, message=why))
    return GroupPlan(lws_replicas=size, candidates=candidates)


@dataclass(frozen=True, kw_only=True)
class PodPlan:
    """What a single-node spec asks while groups of an earlier multi-node spec still serve."""

    replicas: int
    """Single-node replicas to have now: room for them is made one group at a time."""
    candidates: list[Candidate]
    """The highest group's leader (TopologyChanged), removed by shrinking the set."""
    remove_set: bool
    """No group serves any more (no leader left): the set goes at once."""


def plan_pods_beside_groups(*, replicas: int, pods: Sequence[PodView]) -> PodPlan:
    """A switch back to one node: groups are drained and removed from the top, one budgeted decision at a
    time, while single-node replicas are created for the room each removal leaves (at least one, which
    starts at once on NPUs that are free)."""
    grouped = [p for p in pods if p.worker_index is not None and not p.terminating]
    live_groups = {p.replica for p in grouped}
    leaders = _live_leaders(pods)
    if grouped and not leaders:
        return PodPlan(replicas=min(replicas, 1), candidates=[], remove_set=True)
    room = min(replicas, max(1, replicas - len(live_groups))) if replicas > 0 else 0
    top = _excess_leader(leaders, 0)
    plain = [p for p in pods if p.worker_index is None]
    arriving = len([p for p in plain if not p.terminating]) < room or any(
        _arriving([p], expected=1) for p in plain if not p.terminating
    )
    top = None if arriving else top  # single-node pods that load on free NPUs: wait for them first
    message = "the service now runs on one node per replica: the group makes way for single-node pods"
    candidates = (
        []
        if top is None
        else [Candidate(pod=top.name, uid=top.uid, reason=RollReason.TOPOLOGY_CHANGED, message=message)]
    )
    return PodPlan(replicas=room, candidates=candidates, remove_set=False)


@dataclass(frozen=True, kw_only=True)
class Recreated:
    """A group LWS recreated on its own, as the operator observed it: the leader it had and why it went."""

    pod: str
    uid: str
    """The uid of the leader that went (the record's, so the same recreation is never recorded twice)."""
    reason: RollReason
    message: str


def leaders_seen(pods: Sequence[PodView], *, before: Mapping[str, Sequence[str]], size: int) -> dict[str, list[str]]:
    """Group index -> [leader uid, its spec hash, "1" once it served], what the set's annotation keeps: the
    live leaders, and for a group being recreated (no live leader yet) the one seen before; groups at or above
    the set's size (removed) are forgotten, so a group made again later is not taken for a recreation."""
    kept = {i: list(v) for i, v in before.items() if i.isdigit() and int(i) < size and len(v) >= 1}

    def served(index: str, leader: PodView) -> str:
        was = kept.get(index, [])
        return "1" if leader.ready or (was[:1] == [leader.uid] and was[2:3] == ["1"]) else "0"

    live = {str(i): [p.uid, p.spec_hash or "", served(str(i), p)] for i, p in _live_leaders(pods).items()}
    merged = {**kept, **live}
    return {i: merged[i] for i in sorted(merged, key=int)}


def recreated_groups(
    *, seen: Mapping[str, Sequence[str]], pods: Sequence[PodView], recorded: set[str]
) -> list[Recreated]:
    """Groups whose leader is another pod than the one seen last, without a roll recorded for the one seen
    (the operator's own rolls record the leader before deleting it): LeaderWorkerSet recreated them itself,
    after a member restarted or was evicted (GroupRecreated), or in its rolling update (SpecChanged: the new
    leader runs another template). A group with no live leader yet is looked at once it has one. A leader
    that never served is not counted: its group was still being recreated (the operator's own roll of a leader
    makes LWS delete the worker too, which recreates the group once more before it ever served)."""
    out = []
    for index, leader in sorted(_live_leaders(pods).items()):
        before = seen.get(str(index))
        if not before or before[0] == leader.uid or before[0] in recorded or before[2:3] == ["0"]:
            continue
        old_hash = before[1] if len(before) > 1 else ""
        if old_hash and leader.spec_hash and old_hash != leader.spec_hash:
            reason = RollReason.SPEC_CHANGED
            why = f"observed: LeaderWorkerSet's rolling update replaced group {index} (spec {leader.spec_hash})"
        else:
            reason = RollReason.GROUP_RECREATED
            why = f"observed: LeaderWorkerSet recreated group {index} (a member restarted, failed or was evicted)"
        out.append(Recreated(pod=leader.name, uid=before[0], reason=reason, message=why))
    return out
