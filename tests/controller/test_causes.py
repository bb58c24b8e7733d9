"""Why a service does not serve, from pods as the API server returns them: what `kubectl get ais` says."""

from typing import Any

import pytest

from ascend_operator.api.reasons import Relayed, ReplicaReason, VerdictReason
from ascend_operator.controller.causes import Cause, may_fail_mount, mount_failures, pod_cause, replica_causes, worst
from ascend_operator.controller.status import Observed, compute_status
from ascend_operator.controller.views import pod_view

T0 = "2026-11-29T10:00:00Z"
PULL = 'Back-off pulling image "registry.invalid/vllm-ascend:v0.25.1rc1"'
NPU_SHORT = "0/1 nodes are available: 1 Insufficient huawei.com/Ascend910. preemption: 0/1 nodes are available."
TAINTED = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
MOUNT = 'MountVolume.SetUp failed for volume "ascend-driver" : hostPath type check failed: /usr/local/Ascend/driver'


def raw_pod(
    i: int,
    *,
    ready: bool = False,
    phase: str = "Running",
    node: str | None = "atlas-0",
    waiting: tuple[str, str] | None = None,
    restarts: int = 0,
    last: dict[str, Any] | None = None,
    scheduled: tuple[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """An engine pod as `kubectl get pod -o json` shows it."""
    state: dict[str, Any] = {"waiting": {"reason": waiting[0], "message": waiting[1]}} if waiting else {}
    if not waiting and phase == "Running":
        state = {"running": {"startedAt": T0}}
    container = {"name": "engine", "ready": ready, "restartCount": restarts, "state": state}
    if last:
        container["lastState"] = {"terminated": last}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if scheduled:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": scheduled[0], "message": scheduled[1]})
    meta: dict[str, Any] = {
        "name": f"svc-{i}",
        "uid": f"uid-{i}",
        "labels": {"inference.ascend.dev/replica": str(i)},
        "annotations": {"inference.ascend.dev/spec-hash": "h"},
    }
    if deleting:
        meta["deletionTimestamp"] = T0
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if not scheduled:
        status["containerStatuses"] = [container]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "image-pull-backoff",
        raw_pod(0, phase="Pending", waiting=("ImagePullBackOff", PULL)),
        "ImagePullBackOff",
        PULL,
    ),
    (
        "err-image-pull",
        raw_pod(0, phase="Pending", waiting=("ErrImagePull", "failed to pull and unpack image: not found")),
        "ErrImagePull",
        "failed to pull and unpack image: not found",
    ),
    (
        "config-error",
        raw_pod(0, phase="Pending", waiting=("CreateContainerConfigError", 'secret "hf-token" not found')),
        "CreateContainerConfigError",
        'secret "hf-token" not found',
    ),
    (
        "crash-loop",
        raw_pod(
            0,
            waiting=("CrashLoopBackOff", "back-off 5m0s restarting failed container=engine"),
            restarts=7,
            last={"reason": "Error", "exitCode": 1},
        ),
        "CrashLoopBackOff",
        "restarted 7 time(s), last run: Error, exit code 1: back-off 5m0s restarting failed container=engine",
    ),
    ("no-npus", raw_pod(0, phase="Pending", node=None, scheduled=("Unschedulable", NPU_SHORT)),
     "InsufficientNPU", NPU_SHORT),
    ("unschedulable", raw_pod(0, phase="Pending", node=None, scheduled=("Unschedulable", TAINTED)),
     "Unschedulable", TAINTED),
    ("terminating", raw_pod(0, ready=True, deleting=True), "Draining", "the pod is being deleted"),
    (
        "loading",
        raw_pod(0),
        "WaitingForReplicas",
        "phase Running, the engine is not serving yet",
    ),
    ("creating", raw_pod(0, phase="Pending", waiting=("ContainerCreating", "")),
     "WaitingForReplicas", "container ContainerCreating"),
]  # fmt: skip


@pytest.mark.parametrize(("pod", "reason", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_first_blocking_cause_of_a_pod(pod: dict[str, Any], reason: str, message: str) -> None:
    assert pod_cause(pod_view(pod)) == Cause(pod="svc-0", reason=Relayed(reason), message=message)  # as written


def test_a_ready_pod_has_no_cause_unless_health_found_a_fault() -> None:
    view = pod_view(raw_pod(0, ready=True))
    assert pod_cause(view) is None
    stalled = pod_cause(view, health=(VerdictReason.STALLED, "2 request(s) running and no forward progress for 36s"))
    assert stalled == Cause(
        pod="svc-0", reason=VerdictReason.STALLED, message="2 request(s) running and no forward progress for 36s"
    )


def test_failed_mount_comes_from_the_pods_own_events() -> None:
    stuck = pod_view(raw_pod(0, phase="Pending", waiting=("ContainerCreating", "")))
    assert may_fail_mount(stuck)
    events = [
        {"reason": "FailedMount", "message": "older", "lastTimestamp": "2026-11-29T09:00:00Z",
         "involvedObject": {"kind": "Pod", "name": "svc-0", "uid": "uid-0"}},
        {"reason": "FailedMount", "message": MOUNT, "lastTimestamp": "2026-11-29T09:05:00Z",
         "involvedObject": {"kind": "Pod", "name": "svc-0", "uid": "uid-0"}},
        {"reason": "FailedMount", "message": "about the replaced pod of the same name",
         "lastTimestamp": "2026-11-29T09:09:00Z", "involvedObject": {"kind": "Pod", "name": "svc-0", "uid": "old"}},
    ]  # fmt: skip
    failures = mount_failures(events, [stuck])
    assert failures == {"svc-0": MOUNT}
    assert pod_cause(stuck, mount_failure=failures["svc-0"]) == Cause(
        pod="svc-0", reason=ReplicaReason.FAILED_MOUNT, message=MOUNT
    )
    assert not may_fail_mount(pod_view(raw_pod(0, ready=True)))


def test_replicas_without_a_pod_are_named_as_the_operator_will_create_them() -> None:
    """After a scale-down kept `svc-3`, a missing replica is the lowest free index, as plan_pods creates it."""
    views = [pod_view(raw_pod(0, ready=True)), pod_view(raw_pod(3, ready=True))]
    causes = replica_causes(views, service="svc", replicas=3, mount_failures={}, health={})
    assert causes == [Cause(pod="svc-1", reason=ReplicaReason.WAITING_FOR_REPLICAS, message="not created yet")]


def test_a_refused_create_names_the_api_servers_message() -> None:
    quota = 'pods "svc-1" is forbidden: exceeded quota: npus, requested: huawei.com/Ascend910=8, used: 8, limited: 8'
    causes = replica_causes(
        [pod_view(raw_pod(0, ready=True))],
        service="svc",
        replicas=2,
        mount_failures={},
        health={},
        create_failures={"svc-1": quota},
    )
    assert causes == [Cause(pod="svc-1", reason=ReplicaReason.POD_CREATE_FAILED, message=quota)]
    assert worst(causes, faults_only=True) == causes[0]


def test_a_draining_pod_says_so() -> None:
    raw = raw_pod(1, ready=False)
    raw["metadata"].setdefault("annotations", {})["inference.ascend.dev/drain"] = (
        '{"since": "2026-11-29T00:00:00Z", "reason": "ScaleDown", "message": ""}'
    )
    cause = pod_cause(pod_view(raw))
    assert cause == Cause(
        pod="svc-1", reason=ReplicaReason.DRAINING, message="out of the Service, waiting for its requests (ScaleDown)"
    )
    assert cause is not None
    assert not cause.fault


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def status_of(*pods: dict[str, Any], replicas: int, **kw: Any) -> dict[str, Any]:
    observed = Observed(
        generation=1, replicas=replicas, spec_hash="h", pods=[pod_view(p) for p in pods], service="svc", **kw
    )
    return compute_status(observed, previous=None, now=T0)


def test_one_of_two_serving_is_available_not_ready_and_says_why() -> None:
    status = status_of(
        raw_pod(0, ready=True),
        raw_pod(1, phase="Pending", node=None, scheduled=("Unschedulable", NPU_SHORT)),
        replicas=2,
        endpoint="http://svc.ns.svc:8000",
    )
    got = conditions(status)
    assert got["Available"] == ("True", "ReplicasServing", "1/2 replicas ready")
    assert got["Ready"] == ("False", "InsufficientNPU", f"1/2 replicas ready; pod svc-1: InsufficientNPU: {NPU_SHORT}")
    assert got["Degraded"] == ("True", "InsufficientNPU", f"pod svc-1: InsufficientNPU: {NPU_SHORT}")
    assert (status["endpoint"], status["specHash"]) == ("http://svc.ns.svc:8000", "h")


def test_the_most_serious_cause_names_the_service_and_the_others_are_listed() -> None:
    status = status_of(
        raw_pod(0, phase="Pending", node=None, scheduled=("Unschedulable", NPU_SHORT)),
        raw_pod(1, phase="Pending", waiting=("ImagePullBackOff", PULL)),
        replicas=2,
    )
    got = conditions(status)
    assert got["Ready"][1] == "ImagePullBackOff"
    assert got["Available"] == (
        "False",
        "ImagePullBackOff",
        f"no replica serves; pod svc-1: ImagePullBackOff: {PULL}; also svc-0 InsufficientNPU",
    )
    assert got["Degraded"][:2] == ("True", "ImagePullBackOff")


def test_crash_loop_counts_restarts_into_the_status() -> None:
    crash = raw_pod(
        0, waiting=("CrashLoopBackOff", "back-off"), restarts=4, last={"reason": "OOMKilled", "exitCode": 137}
    )
    status = status_of(crash, replicas=1)
    assert status["restarts"] == 4
    assert conditions(status)["Ready"][2] == (
        "0/1 replicas ready; pod svc-0: CrashLoopBackOff: "
        "restarted 4 time(s), last run: OOMKilled, exit code 137: back-off"
    )


def test_health_faults_degrade_and_a_loading_or_draining_pod_does_not() -> None:
    health = {"uid-0": ("ConfigMismatch", "speculative_config is None, spec asks dspark")}
    mismatch = conditions(status_of(raw_pod(0), replicas=1, health=health))
    assert mismatch["Degraded"] == (
        "True",
        "ConfigMismatch",
        "pod svc-0: ConfigMismatch: speculative_config is None, spec asks dspark",
    )
    loading = conditions(status_of(raw_pod(0), replicas=1))
    assert loading["Degraded"] == ("False", "AsExpected", "")
    assert loading["Ready"][:2] == ("False", "WaitingForReplicas")
    draining = conditions(status_of(raw_pod(0, ready=True, deleting=True), replicas=1))
    assert draining["Ready"][:2] == ("False", "Draining")
    assert draining["Degraded"][:2] == ("False", "AsExpected")


def test_scaled_to_zero_is_ready_but_not_available() -> None:
    got = conditions(status_of(replicas=0))
    assert got["Ready"][:2] == ("True", "ScaledToZero")
    assert got["Available"][:2] == ("False", "ScaledToZero")


def test_a_crash_loop_quotes_the_waiting_containers_last_run_not_a_sidecars() -> None:
    crash = raw_pod(0, waiting=("CrashLoopBackOff", "back-off"), restarts=4, last={"reason": "Error", "exitCode": 1})
    engine = crash["status"]["containerStatuses"][0]
    sidecar = {
        "name": "log-shipper",
        "ready": True,
        "restartCount": 1,
        "state": {"running": {"startedAt": T0}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
    }
    crash["status"]["containerStatuses"] = [sidecar, engine]  # the kubelet lists containers by name
    view = pod_view(crash)
    assert view.last_exit == "Error, exit code 1"
    assert view.engine_last_exit == "Error, exit code 1"
    # the engine restarted once and runs again; only the sidecar is held back: each container's own run is quoted
    engine["state"] = {"running": {"startedAt": T0}}
    sidecar["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
    view = pod_view(crash)
    assert view.waiting == ("CrashLoopBackOff", "back-off")
    assert view.last_exit == "OOMKilled, exit code 137"
    assert view.engine_last_exit == "Error, exit code 1"
