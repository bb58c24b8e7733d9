"""The health loop's candidates for pods on nodes that stopped reporting (health/node_loss.py judges one pod):
a replica is asked for once, a multi-node group through its leader.

Why apart from controller/monitor.py: which pod stands for a worker on a lost node depends on when its
leader started against when the node last reported, a rule with its own history (a group a stall roll
already recreated must not be recreated again); the health pass only adds the candidates to its others.
"""

from collections.abc import Mapping

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.controller.engine_io import Monitor
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.timestamps import epoch
from ascend_operator.controller.views import PodView
from ascend_operator.disruption import Candidate, RollReason
from ascend_operator.health.node_loss import NodeLossInput, judge_node_loss
from ascend_operator.health.samples import EngineSample


def node_losses(
    mon: Monitor,
    spec: AscendInferenceServiceSpec,
    every: list[PodView],
    samples: Mapping[str, EngineSample | None],
    memory: ServiceMemory,
) -> list[Candidate]:
    """Pods (terminating ones too) given up because their node stopped reporting and their engine does not
    answer (health/node_loss.py), one candidate per replica: a group is asked for through its leader when any
    member is on a lost node (`_group_target`: a worker left there by an earlier recreation goes by itself). A
    worker serves no API the operator reaches, so its node alone decides."""
    if mon.nodes is None:
        return []
    now, found, lost_nodes = mon.wall(), {}, set()
    leaders = {p.replica: p for p in every if p.worker_index == 0}
    for pod in every:
        if not pod.node:
            continue
        answering = pod.leader_or_single and samples.get(pod.uid) is not None
        check = NodeLossInput(
            pod=pod.name,
            node_name=pod.node,
            node=mon.nodes(pod.node),
            answering=answering,
            now=now,
            window=spec.health.node_lost_seconds,
        )
        reason, message, failed = judge_node_loss(check)
        if not failed:
            continue
        lost_nodes.add(pod.node)
        target = pod if pod.leader_or_single else _group_target(pod, leaders.get(pod.replica), check)
        if target is not None and target.uid not in found:
            found[target.uid] = Candidate(pod=target.name, uid=target.uid, reason=RollReason(reason), message=message)
    memory.lost_nodes = frozenset(lost_nodes)
    return list(found.values())


def _group_target(worker: PodView, leader: PodView | None, check: NodeLossInput) -> PodView:
    """Who goes for a worker on a lost node: its group, through the leader, when the leader predates the
    node's last report (the group the worker belongs to); else the worker alone. A worker already terminating, or one
    whose leader started after the node went silent, was left behind by its group's earlier deletion (a stall
    roll: a lost peer stops the leader's ranks first) or placed there before the node was tainted: deleting
    the new leader would only recreate the group again, while the worker's name is what the group's
    successor waits for."""
    node = check.node
    silence = check.silence
    # the node last reported at its Lease's last renewal (the silence is seen only when the Lease expires,
    # up to its 40 s later: a leader a stall roll recreated in between is already a new group)
    heard = None if node is None else node.lease_renewed
    quiet = heard if heard is not None else (silence[0] if silence is not None else None)
    started = epoch(leader.started_at) if leader is not None else None
    if worker.terminating or leader is None or quiet is None or started is None or started >= quiet:
        return worker
    return leader
