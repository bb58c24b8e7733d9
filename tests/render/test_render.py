"""Whole-object tests of the pure builders: the pod and Service a user gets from a spec."""

from typing import Any

import pytest

from ascend_operator.api.parse import ParsedService, parse_spec
from ascend_operator.render import probes
from ascend_operator.render.args import build_engine_args
from ascend_operator.render.env import build_env
from ascend_operator.render.pod import Owner, build_pod, build_pod_spec, build_service, spec_hash
from ascend_operator.render.probes import probe_source

OWNER = Owner(name="dsv4-flash", namespace="llm", uid="3f1c7f9e-0000-4000-8000-000000000001")
LABELS = {
    "app.kubernetes.io/name": "ascend-inference",
    "app.kubernetes.io/instance": "dsv4-flash",
    "app.kubernetes.io/component": "engine",
    "app.kubernetes.io/managed-by": "ascend-inference-operator",
    "inference.ascend.dev/service": "dsv4-flash",
}
OWNER_REFS = [
    {
        "apiVersion": "inference.ascend.dev/v1alpha1",
        "kind": "AscendInferenceService",
        "name": "dsv4-flash",
        "uid": "3f1c7f9e-0000-4000-8000-000000000001",
        "controller": True,
        "blockOwnerDeletion": True,
    }
]
MODEL = "/data/models/DeepSeek-V4-Flash-0731-w8a8"


def _host(name: str, path: str, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {"name": name, "hostPath": {"path": path, "type": kind}},
        {"name": name, "mountPath": path, "readOnly": True},
    )


ASCEND = [
    _host("ascend-dcmi", "/usr/local/dcmi", "Directory"),
    _host("ascend-npu-smi", "/usr/local/bin/npu-smi", "File"),
    _host("ascend-driver-lib64", "/usr/local/Ascend/driver/lib64", "Directory"),
    _host("ascend-driver-version", "/usr/local/Ascend/driver/version.info", "File"),
    _host("ascend-install-info", "/etc/ascend_install.info", "File"),
]


def test_example_pod_is_exactly_the_production_pod(example: ParsedService) -> None:
    pod = build_pod(example.spec, owner=OWNER, replica=0)
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "dsv4-flash-0",
            "namespace": "llm",
            "labels": {
                **LABELS,
                "inference.ascend.dev/replica": "0",
                # the ControllerRevision it runs: the engine digest without the key version
                "inference.ascend.dev/revision": spec_hash(example.spec),
            },
            "annotations": {"inference.ascend.dev/spec-hash": spec_hash(example.spec)},
            "ownerReferences": OWNER_REFS,
        },
        "spec": {
            "shareProcessNamespace": True,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 60,
            "readinessGates": [{"conditionType": "inference.ascend.dev/engine-ready"}],
            "nodeSelector": {"accelerator": "huawei-Ascend910"},
            "containers": [
                {
                    "name": "engine",
                    "image": "quay.io/ascend/vllm-ascend:DeepSeekV4-flash-0731",
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["vllm", *build_engine_args(example.spec)],
                    "env": build_env(example.spec),
                    "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
                    # Burstable: 48 cores, 256Gi for the engine plus the 64Gi /dev/shm it writes.
                    "resources": {
                        "requests": {
                            "cpu": "160",
                            "memory": "448Gi",
                            "ephemeral-storage": "100Gi",
                            "huawei.com/Ascend910": "8",
                        },
                        "limits": {
                            "cpu": "160",
                            "memory": "448Gi",
                            "ephemeral-storage": "100Gi",
                            "huawei.com/Ascend910": "8",
                        },
                    },
                    "volumeMounts": [
                        {"name": "model", "mountPath": MODEL, "readOnly": True},
                        {"name": "dshm", "mountPath": "/dev/shm"},
                        *[mount for _, mount in ASCEND],
                    ],
                    # 1800 s of startup grace at 10 s per /health probe.
                    "startupProbe": {
                        "httpGet": {"path": "/health", "port": "http"},
                        "periodSeconds": 10,
                        "timeoutSeconds": 5,
                        "failureThreshold": 180,
                    },
                    "readinessProbe": {
                        "exec": {
                            "command": [
                                "python3",
                                "-c",
                                probe_source(),
                                "8000",
                                "deepseek-v4-flash",
                                "4",
                                "10.0",
                                "Reply with OK.",
                            ]
                        },
                        "periodSeconds": 10,
                        "timeoutSeconds": 35,
                        "failureThreshold": 3,
                        "successThreshold": 1,
                    },
                    "securityContext": {
                        "privileged": False,
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": False,
                        "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"]},
                    },
                }
            ],
            "volumes": [
                {"name": "model", "hostPath": {"path": MODEL, "type": "Directory"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                *[volume for volume, _ in ASCEND],
            ],
        },
    }


def test_service_selects_the_engine_pods(example: ParsedService) -> None:
    assert build_service(example.spec, owner=OWNER) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "dsv4-flash",
            "namespace": "llm",
            "labels": LABELS,
            "ownerReferences": OWNER_REFS,
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {"inference.ascend.dev/service": "dsv4-flash"},
            "ports": [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _spec(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "image": "img",
        "model": {"path": "/models/m", "servedName": "m", "source": {"hostPath": {"path": "/models/m"}}},
    }
    body.update(overrides)
    return body


def test_pvc_source_with_ascend_runtime_mounts_no_driver_paths() -> None:
    spec = parse_spec(
        _spec(
            model={
                "path": "/models/m",
                "servedName": "m",
                "source": {"pvc": {"claimName": "w", "subPath": "m"}},
            },
            runtime={"mode": "AscendDockerRuntime", "shmSize": "16Gi"},
            resources={"requests": {"cpu": "32", "memory": "256Gi"}, "limits": {"memory": "400Gi"}},
            scheduling={"tolerations": [{"key": "npu", "operator": "Exists", "effect": "NoSchedule"}]},
        )
    )
    pod = build_pod(spec, owner=Owner(name="m", namespace="ns"), replica=2)
    assert pod["metadata"]["name"] == "m-2"
    assert "ownerReferences" not in pod["metadata"]
    assert pod["spec"]["volumes"] == [
        {"name": "model", "persistentVolumeClaim": {"claimName": "w", "readOnly": True}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
    ]
    container = pod["spec"]["containers"][0]
    assert container["volumeMounts"] == [
        {"name": "model", "mountPath": "/models/m", "readOnly": True, "subPath": "m"},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    assert container["resources"] == {
        "requests": {"cpu": "32", "memory": "256Gi", "huawei.com/Ascend910": "8"},
        "limits": {"memory": "400Gi", "huawei.com/Ascend910": "8"},
    }
    assert pod["spec"]["tolerations"] == [{"key": "npu", "operator": "Exists", "effect": "NoSchedule"}]


def test_env_overrides_replace_profile_values_in_place_and_append_new_names() -> None:
    spec = parse_spec(
        _spec(env=[{"name": "HCCL_BUFFSIZE", "value": "2048"}, {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}])
    )
    env = build_env(spec)
    assert [e["name"] for e in env][:6] == [
        "OMP_NUM_THREADS", "PYTORCH_NPU_ALLOC_CONF", "LD_PRELOAD", "HCCL_BUFFSIZE", "TASK_QUEUE_ENABLE",
        "HCCL_OP_EXPANSION_MODE",
    ]  # fmt: skip
    assert env[3] == {"name": "HCCL_BUFFSIZE", "value": "2048"}
    assert env[6:] == [{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]


def test_minimal_spec_renders_generic_defaults_without_deepseek_flags() -> None:
    args = build_engine_args(parse_spec(_spec(npus=1, parallelism={"tensor": 1, "expert": False})))
    assert args == [
        "serve", "/models/m", "--host", "0.0.0.0", "--port", "8000", "--served-model-name", "m",
        "--max-num-batched-tokens", "8192", "--gpu-memory-utilization", "0.90", "--max-num-seqs", "32",
        "--data-parallel-size", "1", "--tensor-parallel-size", "1", "--enable-prompt-tokens-details",
        "--block-size", "128", "--no-async-scheduling", "--shutdown-timeout", "45",
    ]  # fmt: skip


def test_async_scheduling_renders_both_states() -> None:
    """vLLM 0.25.1 turns async scheduling on when no flag is given, so off must be said."""
    off = build_engine_args(parse_spec(_spec(engine={"asyncScheduling": False})))
    on = build_engine_args(parse_spec(_spec(engine={"asyncScheduling": True})))
    assert "--no-async-scheduling" in off
    assert "--async-scheduling" not in off
    assert "--async-scheduling" in on
    assert "--no-async-scheduling" not in on


def test_long_context_switch_renders_the_vllm_ascend_keys_and_passthrough_after() -> None:
    spec = parse_spec(
        _spec(
            engine={
                "longContext": {"enabled": True},
                "speculative": {"method": "dspark", "numSpeculativeTokens": 7},
                "additionalConfig": {
                    "enableSharedExpertDp": False,
                    "extra": {"weight_prefetch_config": {"x": 1}},
                },
                "extraArgs": ["--seed", "0"],
            }
        )
    )
    args = build_engine_args(spec)
    assert args[args.index("--additional-config") + 1] == (
        '{"enable_shared_expert_dp":false,"enable_dsa_cp":true,"enable_flashcomm1":true,'
        '"weight_prefetch_config":{"x":1}}'
    )
    assert args[-2:] == ["--seed", "0"]


def test_spec_hash_ignores_replicas_and_detector_knobs_but_not_engine_settings(example: ParsedService) -> None:
    scaled = example.spec.model_copy(update={"replicas": 3})
    health = example.spec.health
    tuned = example.spec.model_copy(
        update={"health": health.model_copy(update={"rolls": health.rolls.model_copy(update={"max_per_hour": 9})})}
    )
    assert spec_hash(tuned) == spec_hash(example.spec)
    retuned = example.spec.model_copy(
        update={"engine": example.spec.engine.model_copy(update={"max_num_batched_tokens": 4096})}
    )
    assert spec_hash(scaled) == spec_hash(example.spec)
    assert spec_hash(retuned) != spec_hash(example.spec)


def test_canary_knobs_grace_and_the_probe_source_never_restart_an_engine(
    example: ParsedService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator upgrade (a new probe script) or a health knob only the operator reads keeps every pod."""
    before = spec_hash(example.spec)
    health = example.spec.health
    canary = health.canary.model_copy(update={"timeout_seconds": 3.0, "period_seconds": 30.0, "max_tokens": 1})
    tuned = example.spec.model_copy(
        update={"health": health.model_copy(update={"canary": canary, "startup_grace_seconds": 3600.0})}
    )
    assert spec_hash(tuned) == before
    monkeypatch.setattr(probes, "probe_source", lambda: "print('a newer operator's probe')")
    assert build_pod_spec(example.spec)["containers"][0]["readinessProbe"]["exec"]["command"][2].startswith("print")
    assert spec_hash(example.spec) == before


def test_npu_resource_name_is_the_operators(example: ParsedService) -> None:
    """Huawei Cloud CCE's device plugin advertises huawei.com/ascend-1980, MindCluster's huawei.com/Ascend910."""
    pod = build_pod(example.spec, owner=OWNER, replica=0, npu_resource="huawei.com/ascend-1980")
    resources = pod["spec"]["containers"][0]["resources"]
    cpu_memory = {"cpu": "160", "memory": "448Gi", "ephemeral-storage": "100Gi"}
    assert resources == {
        "requests": {**cpu_memory, "huawei.com/ascend-1980": "8"},
        "limits": {**cpu_memory, "huawei.com/ascend-1980": "8"},
    }


@pytest.mark.parametrize(("timeout", "grace"), [(45, 60), (0, 15), (600, 615)])
def test_the_pods_grace_outlasts_vllms_own_drain_after_sigterm(timeout: int, grace: int) -> None:
    """A SIGTERM the operator did not drain first (kubectl delete pod, an eviction) lets vLLM finish its
    requests for `--shutdown-timeout` seconds; the kubelet's SIGKILL must come after that, not during it."""
    spec = parse_spec(_spec(engine={"shutdownTimeoutSeconds": timeout}))
    args = build_engine_args(spec)
    assert args[args.index("--shutdown-timeout") + 1] == str(timeout)
    pod_spec = build_pod_spec(spec)
    assert pod_spec["terminationGracePeriodSeconds"] == grace
