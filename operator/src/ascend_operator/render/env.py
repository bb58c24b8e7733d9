"""The engine's environment: the seed's six production variables, overridden by the spec by name, and the
API key from its Secret.

The key goes in as `valueFrom.secretKeyRef`, so the pod spec carries only the Secret's name: vLLM reads
VLLM_API_KEY (vllm/envs.py:752) when no `--api-key` is given (vllm/entrypoints/openai/api_server.py:251-255),
and the kubelet's exec readiness probe inherits the container's environment, so the canary probe reads
the key from there instead of from its arguments.
"""

from typing import Any

from ascend_operator.api.spec import AscendInferenceServiceSpec

#: docs/FACTS.md "Production profile (final)", the six exports before `vllm serve`, in their order.
PROFILE_ENV: tuple[tuple[str, str], ...] = (
    ("OMP_NUM_THREADS", "10"),
    ("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True"),
    ("LD_PRELOAD", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"),
    ("HCCL_BUFFSIZE", "1024"),
    ("TASK_QUEUE_ENABLE", "1"),
    ("HCCL_OP_EXPANSION_MODE", "AIV"),
)
#: The variable vLLM 0.25.1 takes its API key from (vllm/envs.py:752).
API_KEY_ENV = "VLLM_API_KEY"


def build_env(spec: AscendInferenceServiceSpec) -> list[dict[str, Any]]:
    """Profile defaults in order, each replaced in place by a spec entry of the same name; new names after;
    the API key's secretKeyRef last."""
    overrides = {var.name: var.value for var in spec.env}
    env: list[dict[str, Any]] = [{"name": name, "value": overrides.pop(name, value)} for name, value in PROFILE_ENV]
    env += [{"name": var.name, "value": var.value} for var in spec.env if var.name in overrides]
    ref = spec.auth.api_key_secret_ref
    if ref is not None:
        env.append({"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    return env
