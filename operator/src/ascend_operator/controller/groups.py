"""Per-group status of a multi-node service: one line per LeaderWorkerSet group, from its pods.

Pure. A group is one replica: its leader serves and is judged; the status also says whether every
worker is there and on which nodes the group runs, so `kubectl get ais -o yaml` shows a group that
is short of a worker (Pending for NPUs, or being recreated) without listing pods.
"""

from typing import Any

from ascend_operator.controller.views import PodView


def group_status(pods: list[PodView], *, size: int) -> list[dict[str, Any]]:
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
            {
                "index": index,
                "leader": leader.name if leader else "",
                "ready": bool(leader and leader.ready),
                "pods": f"{len(members)}/{size}",
                "nodes": [p.node for p in members if p.node],
            }
        )
    return out
