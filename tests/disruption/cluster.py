"""A small cluster for the reconcile pass of a service that switches between one node and several per
replica: the in-memory API server the pass talks to, plus the three controllers it relies on, stepped by
the test.

- LeaderWorkerSet: group i of `spec.replicas` gets its leader `<set>-<i>` and workers `<set>-<i>-<j>` from
  the templates; groups at or above `replicas` go (LWS removes groups from the top);
- the scheduler: a pending pod takes a free node (one pod per node: each holds a whole node's NPUs), or
  is Unschedulable for lack of NPUs;
- the kubelet: a pod placed in one step has loaded by the next; a single-node pod is Ready once loaded, a
  leader once its whole group is, and no pod is Ready while it drains; a terminating pod is gone a step later.
"""

import copy
from collections.abc import Mapping
from typing import Any

from ascend_operator.api.constants import ANNOTATION_DRAIN, KIND, LWS_KIND
from tests.fixtures.kube import Call, FakeKube

T0 = "2027-01-15T06:00:00Z"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


class Cluster:
    """The controllers around the in-memory API server `kube` (tests/fixtures/kube.py), which the pass
    talks to."""

    def __init__(self, *, nodes: int, body: Mapping[str, Any]) -> None:
        self.free = [f"node-{i}" for i in range(nodes)]
        self.kube = FakeKube(now=T0)
        self.namespace = body["metadata"]["namespace"]
        service = {"kind": KIND, "metadata": copy.deepcopy(dict(body["metadata"])), "spec": body["spec"], "status": {}}
        self.kube.add(service, namespace=self.namespace)
        self.name = body["metadata"]["name"]
        self.kube.before("delete", LWS_KIND, self._collect_groups)

    @property
    def pods(self) -> dict[str, dict[str, Any]]:
        """The stored pods by name (the objects themselves: the controllers edit them)."""
        return {p["metadata"]["name"]: p for p in self.kube.of_kind("Pod", self.namespace)}

    @property
    def lws(self) -> dict[str, Any] | None:
        found = self.kube.of_kind(LWS_KIND, self.namespace)
        return found[0] if found else None

    @property
    def pdb(self) -> dict[str, Any] | None:
        found = self.kube.of_kind("PodDisruptionBudget", self.namespace)
        return found[0] if found else None

    @property
    def ais(self) -> dict[str, Any]:
        found = self.kube.obj(KIND, self.name, self.namespace)
        assert found is not None
        return found

    async def _collect_groups(self, call: Call) -> None:
        """The garbage collector of a foreground deletion: the set's pods go first."""
        for pod in self.pods.values():
            if GROUP_INDEX in pod["metadata"]["labels"]:
                pod["metadata"]["deletionTimestamp"] = T0

    # -- the controllers ------------------------------------------------------------------------------
    def _add(self, body: Mapping[str, Any]) -> None:
        """LWS creates a pod of a group."""
        pod = {"kind": "Pod", **copy.deepcopy(dict(body))}
        pod["metadata"].update({"namespace": self.namespace, "creationTimestamp": T0})
        self.kube.add(pod)

    def _lws_step(self) -> None:
        if self.lws is None:
            return
        spec, name = self.lws["spec"], self.lws["metadata"]["name"]
        size = spec["leaderWorkerTemplate"]["size"]
        for pod in list(self.pods.values()):
            index = pod["metadata"]["labels"].get(GROUP_INDEX)
            if index is not None and int(index) >= spec["replicas"]:
                pod["metadata"]["deletionTimestamp"] = T0
        self._roll_one(spec, size)
        for group in range(spec["replicas"]):
            for worker in range(size):
                pod_name = f"{name}-{group}" + (f"-{worker}" if worker else "")
                if pod_name in self.pods:
                    continue
                kind = "leaderTemplate" if worker == 0 else "workerTemplate"
                template = spec["leaderWorkerTemplate"][kind]
                labels = {**template["metadata"]["labels"], GROUP_INDEX: str(group), WORKER_INDEX: str(worker)}
                meta = {"name": pod_name, "labels": labels, "annotations": dict(template["metadata"]["annotations"])}
                self._add({"metadata": meta, "spec": template["spec"]})

    def _roll_one(self, spec: Mapping[str, Any], size: int) -> None:
        """LWS's rolling update, one group at a time: when every group is whole and Ready, the highest group
        whose leader runs another template goes (and is made again from the current one)."""
        digest = spec["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["annotations"]
        leaders = {
            int(p["metadata"]["labels"][GROUP_INDEX]): p
            for p in self.pods.values()
            if p["metadata"]["labels"].get(WORKER_INDEX) == "0"
        }
        whole = len(leaders) == spec["replicas"] and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])
            for p in leaders.values()
        )
        if size * len(leaders) != len(self.pods) or not whole:
            return
        stale = [
            i for i, p in leaders.items() if all(p["metadata"]["annotations"].get(k) != v for k, v in digest.items())
        ]
        if stale:
            self.recreate(max(stale))

    def recreate(self, group: int) -> None:
        """Delete every pod of a group, as LWS does on a member's restart (RecreateGroupOnPodRestart)."""
        for pod in self.pods.values():
            if pod["metadata"]["labels"].get(GROUP_INDEX) == str(group):
                pod["metadata"]["deletionTimestamp"] = T0

    def _group_ready(self, pod: Mapping[str, Any], loading: set[str]) -> bool:
        index = pod["metadata"]["labels"][GROUP_INDEX]
        members = [n for n, p in self.pods.items() if p["metadata"]["labels"].get(GROUP_INDEX) == index]
        size = self.lws["spec"]["leaderWorkerTemplate"]["size"] if self.lws else 0
        placed = all(self.pods[n]["spec"].get("nodeName") and n not in loading for n in members)
        return len(members) == size and placed

    def step(self) -> None:
        """One round of the LWS controller, the scheduler and the kubelet."""
        for pod in self.pods.values():
            pod["metadata"].setdefault("annotations", {})
            pod.setdefault("status", {"phase": "Pending", "conditions": []})
            if pod["metadata"].get("deletionTimestamp") and pod["spec"].get("nodeName"):
                self.free.append(pod["spec"]["nodeName"])
        self.kube.finish_terminating()
        self._lws_step()
        for pod in self.pods.values():
            pod["metadata"].setdefault("annotations", {})
            pod.setdefault("status", {"phase": "Pending", "conditions": []})
        loading = set()  # an engine placed this step loads its weights until the next
        for pod in sorted(self.pods.values(), key=lambda p: p["metadata"]["name"]):
            if not pod["spec"].get("nodeName") and self.free:
                pod["spec"] = {**pod["spec"], "nodeName": self.free.pop(0)}
                pod["status"] = {"phase": "Running", "podIP": "10.0.0.1", "startTime": T0, "conditions": []}
                loading.add(pod["metadata"]["name"])
            elif not pod["spec"].get("nodeName"):
                unschedulable = "0/9 nodes are available: 9 Insufficient huawei.com/Ascend910."
                scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                pod["status"]["conditions"] = [{**scheduled, "message": unschedulable}]
        for name, pod in self.pods.items():
            labels = pod["metadata"]["labels"]
            started = bool(pod["spec"].get("nodeName")) and name not in loading
            ready = started and (WORKER_INDEX not in labels or self._group_ready(pod, loading))
            ready = ready and ANNOTATION_DRAIN not in pod["metadata"]["annotations"]
            if started:
                pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]

    def serving(self) -> int:
        """Replicas that serve: Ready single-node pods and Ready leaders."""
        return sum(
            1
            for p in self.pods.values()
            if p["metadata"]["labels"].get(WORKER_INDEX) in (None, "0")
            and not p["metadata"].get("deletionTimestamp")
            and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])
        )

    def plain(self) -> list[str]:
        return sorted(n for n, p in self.pods.items() if WORKER_INDEX not in p["metadata"]["labels"])

    def leaders(self) -> list[str]:
        return sorted(n for n, p in self.pods.items() if p["metadata"]["labels"].get(WORKER_INDEX) == "0")
