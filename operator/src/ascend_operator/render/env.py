"""The engine's environment: the seed's six production variables, overridden by the spec by name, and the
API key from its Secret.

The key goes in as `valueFrom.secretKeyRef`, so the pod spec carries only the Secret's name: vLLM reads
VLLM_API_KEY (vllm/envs.py:752) when no `--api-key` is given (vllm/entrypoints/openai/api_server.py:251-255),
and the kubelet's exec readiness probe inherits the container's environment, so the canary probe reads
the key from there instead of from its arguments.
"""

from typing import Any

from ascend_operator.api.disaggregation import PdRole
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
#: The address vLLM's get_ip() returns (utils/network_utils.py:34), which the Mooncake connector publishes to
#: the other role as its host (mooncake_connector.py:1583, :1944): the pod IP, so the decode pulls from it.
HOST_IP_ENV = "VLLM_HOST_IP"
#: How long a prefill engine keeps KV no decode engine pulled (vLLM envs.py:1661-1662).
ABORT_TIMEOUT_ENV = "VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT"


def build_env(spec: AscendInferenceServiceSpec) -> list[dict[str, Any]]:
    """Profile defaults in order, each replaced in place by a spec entry of the same name; new names after;
    the API key's secretKeyRef last."""
    overrides = {var.name: var.value for var in spec.env}
    env: list[dict[str, Any]] = [{"name": name, "value": overrides.pop(name, value)} for name, value in PROFILE_ENV]
    env += [{"name": var.name, "value": var.value} for var in spec.env if var.name in overrides]
    env += _pd_env(spec, named={var.name for var in spec.env})
    ref = spec.auth.api_key_secret_ref
    if ref is not None:
        env.append({"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    return env


def _pd_env(spec: AscendInferenceServiceSpec, *, named: set[str]) -> list[dict[str, Any]]:
    """A role of a disaggregated service: the pod IP as VLLM_HOST_IP, and on prefill engines the abort
    timeout of unpulled KV; a name the spec sets itself is left to the spec."""
    pd = spec.pd_role
    if pd is None:
        return []
    env: list[dict[str, Any]] = []
    if HOST_IP_ENV not in named:
        env.append({"name": HOST_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if pd.role is PdRole.PREFILL and ABORT_TIMEOUT_ENV not in named:
        env.append({"name": ABORT_TIMEOUT_ENV, "value": str(pd.abort_seconds)})
    return env
