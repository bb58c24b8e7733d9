"""Format the HBM/KV budget and the prefill scheduling for people: one table per service, figures per NPU.

The prefill lines answer the seed's open question for the spec at hand (docs/FACTS.md "Target workload":
1 x ~300K context beside short requests): how many steps the long prompt's prefill takes and whether a short
prompt arriving meanwhile waits for all of it. vLLM 0.25.1 schedules running requests first, each taking up to
longPrefillTokenThreshold (when set) and the remaining step budget (vllm/v1/core/sched/scheduler.py:478-480),
then waiting ones under the same cap (:827-829): without a threshold a long prefill takes the whole budget.
"""

from math import ceil

from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.validation.budget import BudgetFit, BudgetPlan

#: The seed's mixed workload: one ~300K-token prompt, the rest short (docs/FACTS.md "Target workload"); 2K
#: short prompts as docs/benchmarking.md sends them.
SEED_LONG_PROMPT = 300_000
SEED_SHORT_PROMPT = 2048


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} GiB"


def prefill_lines(spec: AscendInferenceServiceSpec) -> list[str]:
    """What the batch budget and the long-prefill threshold mean for the seed's 300K prompt beside short ones."""
    eng = spec.engine
    mbt = eng.max_num_batched_tokens
    cap = eng.long_prefill_token_threshold or 0
    uncapped = ceil(SEED_LONG_PROMPT / mbt)
    if not 0 < cap < mbt:
        why = "unset" if not cap else f"{cap} >= MBT, no effect"
        return [
            f"  long prefill cap     {why}: the seed's 300K prompt prefills in {uncapped} steps of {mbt} tokens, "
            "each taking the whole step budget,",
            f"                       so a short prompt arriving meanwhile waits for the rest of it (up to {uncapped} "
            "steps); set longPrefillTokenThreshold",
        ]
    share = min(cap, mbt - cap)
    lines = [
        f"  long prefill cap     {cap} tokens per request per step: the seed's 300K prompt prefills in "
        f"{ceil(SEED_LONG_PROMPT / cap)} steps ({uncapped} uncapped),",
        f"                       leaving {mbt - cap} tokens of each step to others: a {SEED_SHORT_PROMPT}-token "
        f"prompt arriving meanwhile prefills in {ceil(SEED_SHORT_PROMPT / share)} step(s)",
    ]
    spd = eng.speculative
    if spd is not None and spd.num_speculative_tokens + 1 > cap:
        lines.append(
            f"                       and it caps speculative decodes: {cap - 1} of {spd.num_speculative_tokens} "
            "drafts verified per step (scheduler.py:478-479 caps a running decode too)"
        )
    return lines


def format_plan(name: str, plan: BudgetPlan, spec: AscendInferenceServiceSpec) -> str:
    """A plain-text budget report."""
    eng = spec.engine
    lines = [
        f"service {name}: TP{spec.parallelism.tensor} x DP{spec.parallelism.data}, "
        f"maxModelLen {eng.max_model_len or 'model default'}, MBT {eng.max_num_batched_tokens}, "
        f"gpuMemoryUtilization {eng.gpu_memory_utilization:.2f}",
        f"  model profile        {plan.profile or '-'}",
    ]
    if plan.verdict is not BudgetFit.SKIPPED or plan.free_kv_gib is not None:
        lines += [
            f"  usable HBM per NPU   {_gib(plan.hbm_usable_gib)}",
            f"  weights+act+graphs   {_gib(plan.fixed_gib)}",
            f"  free for KV per NPU  {_gib(plan.free_kv_gib)}",
            f"  startup KV need      {_gib(plan.needed_gib)}"
            + (f" ({plan.needed_fraction:.0%} of free)" if plan.needed_fraction is not None else ""),
            f"  KV pool              {plan.kv_pool_tokens:,} tokens" if plan.kv_pool_tokens is not None else "",
            _max_length(plan),
        ]
    lines.append(f"  verdict              {plan.verdict}: {plan.note}")
    lines += prefill_lines(spec)
    return "\n".join(line for line in lines if line)


def _max_length(plan: BudgetPlan) -> str:
    """How many maxModelLen requests the pool holds at once, and what one context token costs in it."""
    if plan.max_len_requests is None:
        return ""
    cost = plan.pool_tokens_per_context_token
    per = f" ({cost:g} pool tokens per context token: hybrid KV)" if cost is not None and cost != 1 else ""
    return f"  max-length requests  {plan.max_len_requests} at once{per}"
