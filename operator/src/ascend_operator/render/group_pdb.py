"""The PodDisruptionBudget of a multi-node service: evictions counted in groups, not pods.

Why its own budget: a group (one LeaderWorkerSet replica) serves only with all its pods, and LWS's
`RecreateGroupOnPodRestart` recreates the whole group when any one of them goes, so one evicted worker
takes a whole replica out. A budget over pods that allowed as many evictions as replicas may be lost
would let a `kubectl drain` of several nodes evict one pod of each group and take every group at once.

The budget here is over every pod of the service (same name and selector as the single-node budget of
render/pod.py, so a topology switch patches it in place) with

    minAvailable = replicas x nodes - out,   out = replicas - spec.disruptionBudget.minAvailable

With every group healthy, `out` evictions are allowed, and each eviction takes at most one
group. Once a group is down, its `nodes` pods are not Ready and the allowance drops by `nodes`, so the
budget stays as strict as the groups it lost allow (it may wait longer than needed, never take more).
Pods that are not Ready are always evictable (`unhealthyPodEvictionPolicy: AlwaysAllow`), so a broken
group never blocks node maintenance. spec.disruptionBudget.minAvailable counts serving replicas: pods
for a single-node service, groups here.
"""

from typing import Any

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.render.pod import Owner, pdb_object


def groups_allowed_out(spec: AscendInferenceServiceSpec) -> int:
    """Groups an eviction may take out at once: the replicas above spec.disruptionBudget.minAvailable."""
    return max(0, spec.replicas - spec.disruption_budget.min_available)


def build_group_pdb(spec: AscendInferenceServiceSpec, *, owner: Owner) -> dict[str, Any] | None:
    """The group budget of a multi-node service; None when disabled or for a single-node spec."""
    if not spec.disruption_budget.enabled or spec.parallelism.nodes <= 1:
        return None
    pods = spec.replicas * spec.parallelism.nodes
    return pdb_object(owner, min_available=max(0, pods - groups_allowed_out(spec)))
