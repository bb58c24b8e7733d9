"""The engine's environment: the seed's six production variables, overridden by the spec by name."""

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


def build_env(spec: AscendInferenceServiceSpec) -> list[dict[str, str]]:
    """Profile defaults in order, each replaced in place by a spec entry of the same name; new names after."""
    overrides = {var.name: var.value for var in spec.env}
    env = [{"name": name, "value": overrides.pop(name, value)} for name, value in PROFILE_ENV]
    env += [{"name": var.name, "value": var.value} for var in spec.env if var.name in overrides]
    return env
