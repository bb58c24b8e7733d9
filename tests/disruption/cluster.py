"""A small in-memory cluster for the reconcile pass of a service that switches between one node and several
per replica: the API calls the pass makes, plus the three controllers it relies on, stepped by the test.

- LeaderWorkerSet: group i of `spec.replicas` gets its leader `<set>-<i>` and workers `<set>-<i>-<j>` from
  the templates; groups at or above `replicas` go (LWS removes groups from the top);
- the scheduler: a pending pod takes a free node (one pod per node: each holds a whole node's NPUs), or
  is Unschedulable for lack of NPUs;
- the kubelet: a pod placed in one step has loaded by the next; a single-node pod is Ready once loaded, a
  leader once its whole group is, and no pod is Ready while it drains; a terminating pod is gone a step later.
"""

import copy
import json
from collections.abc import Mapping
from typing import Any

from ascend_operator.api.constants import ANNOTATION_DRAIN

T0 = "2027-01-15T06:00:00Z"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


class Cluster:
    def __init__(self, *, nodes: int, body: Mapping[str, Any]) -> None:
        self.free = [f"node-{i}" for i in range(nodes)]
        self.pods: dict[str, dict[str, Any]] = {}
        self.lws: dict[str, Any] | None = None
        self.pdb: dict[str, Any] | None = None
        self.others: dict[str, dict[str, Any]] = {}
        self.ais = {"metadata": dict(body["metadata"]), "spec": body["spec"], "status": {}}
        self.version = 1
        self.uids = 0
        self.events: list[tuple[str, str]] = []

    # -- the controllers ------------------------------------------------------------------------------
    def _add(self, body: Mapping[str, Any]) -> None:
        self.uids += 1
        pod = copy.deepcopy(dict(body))
        pod["metadata"].setdefault("annotations", {})
        pod["metadata"]["uid"] = f"uid-{self.uids}"
        pod["metadata"]["creationTimestamp"] = T0
        pod["status"] = {"phase": "Pending", "conditions": []}
        self.pods[pod["metadata"]["name"]] = pod

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
        for name, pod in list(self.pods.items()):
            if pod["metadata"].get("deletionTimestamp"):
                if pod["spec"].get("nodeName"):
                    self.free.append(pod["spec"]["nodeName"])
                del self.pods[name]
        self._lws_step()
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

    # -- the API calls of a reconcile pass -------------------------------------------------------------
    async def list_pods(self, namespace: str, service: str) -> list[dict[str, Any]]:
        return copy.deepcopy(list(self.pods.values()))

    async def create(self, body: Mapping[str, Any]) -> bool:
        if body["kind"] == "Pod":
            if body["metadata"]["name"] in self.pods:
                return False
            self._add(body)
        elif body["kind"] == "PodDisruptionBudget":
            self.pdb = copy.deepcopy(dict(body))
        else:
            self.others[body["kind"]] = copy.deepcopy(dict(body))
        return True

    async def read_network_policy(self, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        return self.others.get("NetworkPolicy")

    async def read_service(self, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        return self.others.get("Service")

    async def patch_service(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.others["Service"]["spec"].update(copy.deepcopy(dict(patch["spec"])))

    async def patch_network_policy(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.others["NetworkPolicy"]["spec"] = copy.deepcopy(dict(patch["spec"]))

    async def read_pdb(self, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        return copy.deepcopy(self.pdb)

    async def patch_pdb(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        assert self.pdb is not None
        self.pdb["spec"].update(patch["spec"])

    async def delete_pdb(self, namespace: str, name: str) -> None:
        self.pdb = None

    async def list_mount_failures(self, namespace: str) -> list[dict[str, Any]]:
        return []

    async def read_lws(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.lws)

    async def create_lws(self, body: Mapping[str, Any]) -> bool:
        if self.lws is not None:
            return False
        self.lws = copy.deepcopy(dict(body))
        return True

    async def patch_lws(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        assert self.lws is not None
        self.lws["metadata"].setdefault("annotations", {}).update((patch.get("metadata") or {}).get("annotations", {}))
        self.lws["spec"].update(copy.deepcopy(dict(patch.get("spec") or {})))

    async def delete_lws(self, namespace: str, name: str) -> bool:
        if self.lws is None:
            return False
        self.lws = None
        for pod in self.pods.values():
            if GROUP_INDEX in pod["metadata"]["labels"]:
                pod["metadata"]["deletionTimestamp"] = T0
        return True

    async def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        pod = self.pods.get(name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        pod["metadata"]["deletionTimestamp"] = T0
        return True

    async def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        if name not in self.pods:
            return False
        self.pods[name]["metadata"]["annotations"].update(patch["metadata"]["annotations"])
        return True

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        return name in self.pods

    async def read_ais(self, namespace: str, name: str) -> dict[str, Any]:
        meta = {**self.ais["metadata"], "resourceVersion": str(self.version)}
        return json.loads(json.dumps({**self.ais, "metadata": meta}))

    async def patch_status_at(self, namespace: str, name: str, version: str, status: Mapping[str, Any]) -> bool:
        if version != str(self.version):
            return False
        self.ais["status"].update(copy.deepcopy(dict(status)))
        self.version += 1
        return True

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.ais["status"].update(copy.deepcopy(dict(status)))
        self.version += 1
