"""Format the HBM/KV budget for people: one table per service, figures per NPU."""

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.validation.budget import BudgetPlan, Verdict


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} GiB"


def format_plan(name: str, plan: BudgetPlan, spec: AscendInferenceServiceSpec) -> str:
    """A plain-text budget report."""
    eng = spec.engine
    lines = [
        f"service {name}: TP{spec.parallelism.tensor} x DP{spec.parallelism.data}, "
        f"maxModelLen {eng.max_model_len or 'model default'}, MBT {eng.max_num_batched_tokens}, "
        f"gpuMemoryUtilization {eng.gpu_memory_utilization:.2f}",
        f"  model profile        {plan.profile or '-'}",
    ]
    if plan.verdict is not Verdict.SKIPPED or plan.free_kv_gib is not None:
        lines += [
            f"  usable HBM per NPU   {_gib(plan.hbm_usable_gib)}",
            f"  weights+act+graphs   {_gib(plan.fixed_gib)}",
            f"  free for KV per NPU  {_gib(plan.free_kv_gib)}",
            f"  startup KV need      {_gib(plan.needed_gib)}"
            + (f" ({plan.needed_fraction:.0%} of free)" if plan.needed_fraction is not None else ""),
            f"  KV pool              {plan.kv_pool_tokens:,} tokens" if plan.kv_pool_tokens is not None else "",
            f"  max-length requests  {plan.max_len_requests} at once" if plan.max_len_requests is not None else "",
        ]
    lines.append(f"  verdict              {plan.verdict}: {plan.note}")
    return "\n".join(line for line in lines if line)
