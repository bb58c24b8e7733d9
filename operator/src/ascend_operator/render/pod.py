"""The engine pod, the Service in front of it and their disruption budget, as plain dicts from a spec.

Pure: the same spec, name and owner always give the same objects. One pod per replica, named
`<service>-<index>`: a stable name makes creation idempotent (a retried create meets AlreadyExists instead
of making a duplicate), and a pod that holds all of a node's NPUs is replaced delete-then-create anyway.
"""

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.constants import (
    ANNOTATION_SPEC_HASH,
    API_VERSION,
    ENGINE_CONTAINER,
    KIND,
    LABEL_REPLICA,
    LABEL_REVISION,
    LABEL_SERVICE,
    MANAGED_BY,
    NPU_RESOURCE,
)
from ascend_operator.api.spec import AscendInferenceServiceSpec, RuntimeMode
from ascend_operator.render.args import ENGINE_COMMAND, build_engine_args
from ascend_operator.render.env import build_env
from ascend_operator.render.fitness import fitness_terms, with_fitness
from ascend_operator.render.group import Role, group_env, with_role
from ascend_operator.render.hostpaths import ASCEND_HOST_MOUNTS
from ascend_operator.render.probes import READINESS_GATE, readiness_probe, startup_probe
from ascend_operator.render.resources import build_resources
from ascend_operator.render.scheduling import queue_annotations, scheduling_fields

MODEL_VOLUME = "model"
SHM_VOLUME = "dshm"
#: Where vLLM and vllm-ascend write at run time, as emptyDirs when the root filesystem is read-only
#: (volume name, path; the official image runs as root, HOME=/root, WORKDIR /workspace):
#: tempfile and vLLM's RPC sockets (vllm/envs.py:662 VLLM_RPC_BASE_PATH = gettempdir()), ~/.cache (vLLM's
#: cache root and torch.compile caches, vllm/envs.py:643; vllm-ascend's guide mounts /root/.cache,
#: docs/source/installation.md), ~/.triton (Triton's kernel cache), ~/ascend (CANN's plog directory,
#: vllm_ascend/platform.py:611 "$HOME/ascend/log"), and the workdir, where CANN op compilation leaves
#: kernel_meta/ (vllm-ascend .gitignore:206).
WRITABLE_PATHS: tuple[tuple[str, str], ...] = (
    ("tmp", "/tmp"),
    ("home-cache", "/root/.cache"),
    ("home-triton", "/root/.triton"),
    ("home-ascend", "/root/ascend"),
    ("workspace", "/workspace"),
)
#: Time the pod's grace period leaves after vLLM's own drain (`--shutdown-timeout`) for the engine client to
#: stop, the processes to exit and HBM to be released before the kubelet's SIGKILL.
EXIT_MARGIN_SECONDS = 15


def termination_grace_seconds(spec: AscendInferenceServiceSpec) -> int:
    """The pod's terminationGracePeriodSeconds: vLLM's drain after SIGTERM, then the margin to exit."""
    return spec.engine.shutdown_timeout_seconds + EXIT_MARGIN_SECONDS


@dataclass(frozen=True, kw_only=True)
class Owner:
    """The AscendInferenceService the built objects belong to."""

    name: str
    namespace: str
    uid: str | None = None
    """None when rendering offline (`aisctl render`): the API server assigns it, so no owner reference."""


#: Container fields the operator renders around the engine for its own judgement (the probe script's source,
#: canary knobs, the startup grace): they change with an operator upgrade or a health knob, never the engine.
OPERATOR_OWNED_FIELDS = ("readinessProbe", "startupProbe", "livenessProbe")


def engine_digest(body: Any) -> str:
    """A digest of pod specs (or a structure holding them) without the fields the operator owns."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in OPERATOR_OWNED_FIELDS}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return hashlib.sha256(json.dumps(strip(body), sort_keys=True).encode()).hexdigest()[:16]


def spec_hash(spec: AscendInferenceServiceSpec, *, key_version: str | None = None) -> str:
    """A digest of what the user asked for that changes the engine: a changed hash means replace the pod.

    It covers the rendered pod spec (image, args, env, resources, scheduling, mounts) without the probes the
    operator renders around the engine, so neither `replicas`, nor a detector or canary knob, nor an operator
    upgrade that changes the probe script restarts an engine that takes minutes to load ~292 GB; a pod gets
    the new probe on its next natural restart. Extra pod labels and annotations count: admission webhooks
    read them only when a pod is created. Without them the digest is the pod spec's alone. `key_version` is
    the resourceVersion of the API key's Secret: a container reads its secretKeyRef env once, at start, so a
    rotated key must replace the engines (one at a time, like any spec change) or they keep the old key. The
    version, not the value, goes in: the annotation must not leak a digest of the key.
    """
    body: Any = build_pod_spec(spec)
    if spec.runtime.min_driver_version is not None:  # the versions that meet it are the cluster's, not the spec's
        body = {"spec": body, "minDriverVersion": spec.runtime.min_driver_version}
    if spec.scheduling.volcano is not None:  # Volcano reads the queue when it makes the pod's PodGroup
        body = {"spec": body, "volcanoQueue": spec.scheduling.volcano.queue}
    extra = spec.pod_metadata
    if extra.labels or extra.annotations:  # read at creation only (webhooks, sidecar injection): roll on change
        body = {"spec": body, "labels": extra.labels, "annotations": extra.annotations}
    digest = engine_digest(body)
    if key_version is None:
        return digest
    return hashlib.sha256(f"{digest}\napi-key-version={key_version}".encode()).hexdigest()[:16]


#: The app.kubernetes.io labels every owned object carries; spec.podMetadata.labels may not set them.
OPERATOR_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
)


def common_labels(owner: Owner) -> dict[str, str]:
    """Recommended app.kubernetes.io labels plus the selector label."""
    return {
        "app.kubernetes.io/name": "ascend-inference",
        "app.kubernetes.io/instance": owner.name,
        "app.kubernetes.io/component": "engine",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_SERVICE: owner.name,
    }


def serving_selector(spec: AscendInferenceServiceSpec, owner: Owner) -> dict[str, str]:
    """The labels that select the pods serving this service's API: the Service's selector and the
    InferencePool's matchLabels. Every engine pod of a single-node service; only the leaders of a
    multi-node one (workers are `--headless` and serve no HTTP). Pods carry them from creation."""
    selector = {LABEL_SERVICE: owner.name}
    if spec.parallelism.nodes > 1:
        selector.update(LEADER_SELECTOR)
    return selector


def scale_selector(spec: AscendInferenceServiceSpec, owner: Owner) -> str:
    """`status.selector`, the scale subresource's labelSelectorPath: the pods an autoscaler counts.

    The same pods as the Service's: one per replica. The HPA sets `desired = ceil(usageRatio x pods it
    selected)` (k8s.io/kubernetes v1.37.2 pkg/controller/podautoscaler/replica_calculator.go:195-223)
    and writes that to spec.replicas, which counts groups here; selecting a group's workers too would
    multiply by `nodes` (and they expose no metrics: replica_calculator.go:226-237 then counts them as
    0 or as the target). So a multi-node service selects its leaders only, as LeaderWorkerSet's own
    scale subresource does (sigs.k8s.io/lws v0.7.0 leaderworkerset_types.go:350-353,
    pkg/controllers/leaderworkerset_controller.go:495-508). A leader's /metrics carry every rank.
    """
    return ",".join(f"{key}={value}" for key, value in sorted(serving_selector(spec, owner).items()))


def owner_metadata(owner: Owner) -> dict[str, Any]:
    """The controller owner reference, so garbage collection removes children with the service."""
    if owner.uid is None:
        return {}
    ref = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {"ownerReferences": [ref]}


def pod_name(owner: Owner, replica: int) -> str:
    """Stable pod name of one replica."""
    return f"{owner.name}-{replica}"


def _volumes_and_mounts(
    spec: AscendInferenceServiceSpec,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    src = spec.model.source
    if src.host_path is not None:
        model_volume: dict[str, Any] = {"hostPath": {"path": src.host_path.path, "type": "Directory"}}
        model_mount: dict[str, Any] = {"name": MODEL_VOLUME, "mountPath": spec.model.path, "readOnly": True}
    else:
        assert src.pvc is not None  # ModelSourceExactlyOne
        model_volume = {"persistentVolumeClaim": {"claimName": src.pvc.claim_name, "readOnly": True}}
        model_mount = {"name": MODEL_VOLUME, "mountPath": spec.model.path, "readOnly": True}
        if src.pvc.sub_path:
            model_mount["subPath"] = src.pvc.sub_path
    volumes = [
        {"name": MODEL_VOLUME, **model_volume},
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": spec.runtime.shm_size}},
    ]
    mounts = [model_mount, {"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if spec.runtime.mode is RuntimeMode.HOST_MOUNTS:
        for host in ASCEND_HOST_MOUNTS:
            volumes.append({"name": host.name, "hostPath": {"path": host.path, "type": host.type}})
            mounts.append({"name": host.name, "mountPath": host.path, "readOnly": True})
    if spec.runtime.read_only_root_filesystem:
        for name, path in WRITABLE_PATHS:
            volumes.append({"name": name, "emptyDir": {}})
            mounts.append({"name": name, "mountPath": path})
    return volumes, mounts


def security_context(spec: AscendInferenceServiceSpec) -> dict[str, Any]:
    """No privilege, no escalation, only the capabilities asked for; the root filesystem read-only on
    request. NPUs come from the device plugin's device cgroup entries, not from privileges."""
    capabilities: dict[str, Any] = {"drop": ["ALL"]}
    if spec.runtime.capabilities:
        capabilities["add"] = list(spec.runtime.capabilities)
    return {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": spec.runtime.read_only_root_filesystem,
        "capabilities": capabilities,
    }


def build_engine_container(
    spec: AscendInferenceServiceSpec,
    *,
    mounts: list[dict[str, Any]],
    npu_resource: str = NPU_RESOURCE,
    role: Role | None = None,
) -> dict[str, Any]:
    """The vLLM container: the rendered argument list, env, NPUs, mounts.

    `role` makes it a multi-node group's leader or worker (render/group.py); a `--headless` worker serves
    no HTTP, so it has no port and no probes: the group is judged through its leader.
    """
    env: list[dict[str, Any]] = list(build_env(spec))
    container: dict[str, Any] = {
        "name": ENGINE_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        # No `command`: it would replace the image's ENTRYPOINT (a CANN-based image may source the toolkit's
        # set_env.sh there). `vllm serve ...` as args runs through an `exec "$@"` entrypoint and, in an image
        # with none (vllm-ascend's Dockerfile ends in CMD ["/bin/bash"]), replaces the CMD.
        "args": [*ENGINE_COMMAND, *with_role(build_engine_args(spec), spec, role)],
        "env": env if role is None else group_env(spec, env),
        "ports": [{"name": "http", "containerPort": spec.engine.port, "protocol": "TCP"}],
        "resources": build_resources(spec, npu_resource),
        "volumeMounts": mounts,
        "startupProbe": startup_probe(spec),
        "readinessProbe": readiness_probe(spec),
        "securityContext": security_context(spec),
    }
    if role is Role.WORKER:
        for key in ("ports", "startupProbe", "readinessProbe"):
            del container[key]
    return container


def build_pod_spec(
    spec: AscendInferenceServiceSpec,
    *,
    npu_resource: str = NPU_RESOURCE,
    role: Role | None = None,
    driver_versions: Sequence[str] | None = None,
    avoid_nodes: Sequence[str] = (),
) -> dict[str, Any]:
    """The pod's `spec` (the same for every replica; for a group, the same for every leader or worker);
    `npu_resource` is the operator's device-plugin name, `driver_versions` the cluster's driver versions that
    meet spec.runtime.minDriverVersion, `avoid_nodes` the nodes MindCluster takes out whole (both
    render/fitness.py; neither counts in `spec_hash`: they are the cluster's, not the spec's)."""
    volumes, mounts = _volumes_and_mounts(spec)
    pod_spec: dict[str, Any] = {
        # A shared PID namespace makes the pause container PID 1, which reaps exited `VLLM::Worker`
        # processes; unreaped zombies went with the seed's ~18% throughput drift (docs/FACTS.md "Operations").
        "shareProcessNamespace": True,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": termination_grace_seconds(spec),
        # The operator's own judgement (canary, effective config, stall) gates Service endpoints too.
        "readinessGates": [{"conditionType": READINESS_GATE}],
        "containers": [build_engine_container(spec, mounts=mounts, npu_resource=npu_resource, role=role)],
        "volumes": volumes,
    }
    if role is Role.WORKER:
        del pod_spec["readinessGates"]
    if spec.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": ref.name} for ref in spec.image_pull_secrets]
    if spec.service_account_name is not None:
        pod_spec["serviceAccountName"] = spec.service_account_name
    pod_spec.update(scheduling_fields(spec))  # schedulerName, priorityClassName (render/scheduling.py)
    if spec.scheduling.node_selector:
        pod_spec["nodeSelector"] = dict(spec.scheduling.node_selector)
    if spec.scheduling.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in spec.scheduling.tolerations]
    affinity = with_fitness(spec.scheduling.affinity, fitness_terms(spec, driver_versions), avoid_nodes=avoid_nodes)
    if affinity is not None:
        pod_spec["affinity"] = dict(affinity)
    return pod_spec


def build_pod(
    spec: AscendInferenceServiceSpec,
    *,
    owner: Owner,
    replica: int,
    npu_resource: str = NPU_RESOURCE,
    key_version: str | None = None,
    driver_versions: Sequence[str] | None = None,
    avoid_nodes: Sequence[str] = (),
) -> dict[str, Any]:
    """The engine pod of one replica (`key_version`: see `spec_hash`; `driver_versions`, `avoid_nodes`:
    `build_pod_spec`)."""
    pod_spec = build_pod_spec(spec, npu_resource=npu_resource, driver_versions=driver_versions, avoid_nodes=avoid_nodes)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(owner, replica),
            "namespace": owner.namespace,
            "labels": {
                **spec.pod_metadata.labels,
                **common_labels(owner),
                LABEL_REPLICA: str(replica),
                LABEL_REVISION: spec_hash(spec),  # the ControllerRevision it runs (controller/revisions.py)
            },
            "annotations": {
                **spec.pod_metadata.annotations,
                **queue_annotations(spec),
                ANNOTATION_SPEC_HASH: spec_hash(spec, key_version=key_version),
            },
            **owner_metadata(owner),
        },
        "spec": pod_spec,
    }


#: LWS labels a group's leader with worker index 0 (sigs.k8s.io/lws v0.7.0 leaderworkerset_types.go:44).
LEADER_SELECTOR = {"leaderworkerset.sigs.k8s.io/worker-index": "0"}


def build_pdb(spec: AscendInferenceServiceSpec, *, owner: Owner) -> dict[str, Any] | None:
    """The PodDisruptionBudget over the engine pods, or None when spec.disruptionBudget is disabled.

    minAvailable counts Ready pods, so a drain may take any replica but the last serving one;
    `unhealthyPodEvictionPolicy: AlwaysAllow` (policy/v1, GA in Kubernetes 1.31) lets a drain evict a pod
    that is not Ready whatever the budget, so a crash-looping replica never blocks node maintenance.
    None for a multi-node service: a group serves only with all its pods, so its budget counts groups
    (render/group_pdb.py).
    """
    budget = spec.disruption_budget
    if not budget.enabled or spec.parallelism.nodes > 1:
        return None
    return pdb_object(owner, min_available=budget.min_available)


def pdb_object(owner: Owner, *, min_available: int) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget over the service's engine pods (one name and selector for the
    single-node and the group budget, so a topology switch patches it in place)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": owner.name,
            "namespace": owner.namespace,
            "labels": common_labels(owner),
            **owner_metadata(owner),
        },
        "spec": {
            "minAvailable": min_available,
            "selector": {"matchLabels": {LABEL_SERVICE: owner.name}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def owned_by(obj: dict[str, Any], owner: Owner) -> bool:
    """Whether `obj` is controlled by the service (never delete what a user made under the same name)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner.uid and r.get("controller") for r in refs)


def service_url(spec: AscendInferenceServiceSpec, owner: Owner) -> str:
    """The in-cluster URL of the Service's OpenAI-compatible API."""
    return f"http://{owner.name}.{owner.namespace}.svc:{spec.engine.port}"


def build_service(spec: AscendInferenceServiceSpec, *, owner: Owner) -> dict[str, Any]:
    """The Service over the ready engine pods (ClusterIP unless spec.service.type says otherwise)."""
    metadata: dict[str, Any] = {"name": owner.name, "namespace": owner.namespace, "labels": common_labels(owner)}
    if spec.service.annotations:
        metadata["annotations"] = dict(spec.service.annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**metadata, **owner_metadata(owner)},
        "spec": {
            "type": spec.service.type.value,
            "selector": serving_selector(spec, owner),
            "ports": [{"name": "http", "port": spec.engine.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
