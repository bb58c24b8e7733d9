"""The HBM / KV budget: will the engine start, and how much KV does it get?

Engines load ~292 GB of weights for minutes before vLLM finds out the KV cache does not fit. This module
answers that up front from measured per-NPU figures (the model profiles in `data/model_profiles.yaml`,
docs/FACTS.md "Memory / KV budget (per NPU)") and the fitted startup requirement

    needed_KV ~= 8.15 KiB x max_model_len + 553 KiB x max_num_batched_tokens

against the KV memory free per NPU. Pure: the profiles are read once by `ascend_operator.api.profiles`.
"""

from dataclasses import dataclass, replace
from enum import StrEnum

# the measured figures are the API's (spec.model.profile names one); re-exported for the budget's users
from ascend_operator.api.profiles import Layout as Layout
from ascend_operator.api.profiles import ModelProfile as ModelProfile
from ascend_operator.api.profiles import load_profiles as load_profiles

KIB_PER_GIB = 1024.0 * 1024.0

#: Above this share of the free KV memory a start is "tight". docs/FACTS.md: MBT 16384 needed ~12.9 of ~13.8
#: GiB (93%) and was "very tight"; MBT 8192 needed ~8.6 GiB (62%) and fit. 75% sits between them and
#: leaves ~3.4 GiB per NPU for the page rounding of the four hybrid KV groups and allocator fragmentation.
TIGHT_FRACTION = 0.75
#: Above this share the engine cannot start: the requirement exceeds the free KV memory (MBT 32768 needed
#: ~21.6 GiB of ~13.8 and did not start).
CANNOT_START_FRACTION = 1.0


class BudgetFit(StrEnum):
    """Outcome of the budget check."""

    FITS = "fits"
    TIGHT = "tight"
    CANNOT_START = "cannot-start"
    SKIPPED = "skipped"


@dataclass(frozen=True, kw_only=True)
class BudgetPlan:
    """The per-NPU budget of one spec."""

    verdict: BudgetFit
    note: str
    profile: str | None = None
    tensor: int | None = None
    data: int | None = None
    utilization: float | None = None
    hbm_usable_gib: float | None = None
    fixed_gib: float | None = None
    free_kv_gib: float | None = None
    needed_gib: float | None = None
    kv_pool_tokens: int | None = None
    max_len_requests: int | None = None
    """Requests of maxModelLen tokens the pool holds at once, each costing the profile's pool tokens per
    context token (DeepSeek-V4's hybrid KV: 2.03)."""
    pool_tokens_per_context_token: float | None = None
    """The profile's: pool tokens one token of context takes."""

    @property
    def needed_fraction(self) -> float | None:
        """Startup requirement as a share of the free KV memory."""
        if self.needed_gib is None or not self.free_kv_gib:
            return None
        return self.needed_gib / self.free_kv_gib


@dataclass(frozen=True, kw_only=True)
class BudgetInput:
    """What the budget depends on, taken from the spec."""

    profile: str | None
    tensor: int
    data: int
    utilization: float
    max_model_len: int | None
    max_num_batched_tokens: int
    long_context: bool
    nodes: int = 1


def startup_need_gib(profile: ModelProfile, *, max_model_len: int, max_num_batched_tokens: int) -> float:
    """The fitted startup KV requirement per NPU, in GiB."""
    kib = (
        profile.startup_kib_per_model_len_token * max_model_len
        + profile.startup_kib_per_batched_token * max_num_batched_tokens
    )
    return kib / KIB_PER_GIB


def plan_budget(inp: BudgetInput, *, profiles: dict[str, ModelProfile] | None = None) -> BudgetPlan:
    """Compute the budget, or say why it was skipped."""
    table = load_profiles() if profiles is None else profiles
    if inp.profile is None:
        return BudgetPlan(verdict=BudgetFit.SKIPPED, note="spec.model.profile is not set: budget not checked")
    profile = table.get(inp.profile)
    if profile is None:
        known = ", ".join(sorted(table)) or "none"
        return BudgetPlan(
            verdict=BudgetFit.SKIPPED,
            note=f"unknown model profile {inp.profile!r} (known: {known}): budget not checked, never guessed",
        )
    layout = profile.layout(tensor=inp.tensor, data=inp.data, nodes=inp.nodes)
    if layout is None:
        over = f" over {inp.nodes} nodes" if inp.nodes > 1 else ""
        return BudgetPlan(
            verdict=BudgetFit.SKIPPED,
            profile=inp.profile,
            note=f"profile {inp.profile!r} has no measurement for TP{inp.tensor} x DP{inp.data}{over}: not checked",
        )
    # The usable HBM per NPU follows from the measured split at the measured utilization (~62 GiB on a
    # 910B4-1: (13.8 + 42.07) / 0.90); the KV share then moves one for one with the utilization.
    usable = (layout.free_kv_gib + layout.fixed_gib) / profile.measured_at_utilization
    free_kv = layout.free_kv_gib + (inp.utilization - profile.measured_at_utilization) * usable
    measured = BudgetPlan(
        verdict=BudgetFit.SKIPPED,
        note="",
        profile=inp.profile,
        tensor=inp.tensor,
        data=inp.data,
        utilization=inp.utilization,
        hbm_usable_gib=usable,
        fixed_gib=layout.fixed_gib,
        free_kv_gib=free_kv,
    )
    if free_kv <= 0:
        return replace(
            measured,
            verdict=BudgetFit.CANNOT_START,
            note=f"weights, activations and graphs take {layout.fixed_gib:.2f} GiB per NPU, more than "
            f"{inp.utilization:.2f} x {usable:.1f} GiB: no memory is left for the KV cache",
            kv_pool_tokens=0,
        )
    pool_at_measured = layout.kv_pool_tokens_long_context if inp.long_context else layout.kv_pool_tokens
    pool = int(pool_at_measured * free_kv / layout.free_kv_gib)
    measured = replace(measured, kv_pool_tokens=pool)
    if inp.max_model_len is None:
        return replace(
            measured,
            note="spec.engine.maxModelLen is not set: vLLM takes the model's own limit; startup need not checked",
        )
    needed = startup_need_gib(
        profile, max_model_len=inp.max_model_len, max_num_batched_tokens=inp.max_num_batched_tokens
    )
    fraction = needed / free_kv
    if fraction > CANNOT_START_FRACTION:
        verdict, note = BudgetFit.CANNOT_START, "the startup KV requirement exceeds the free KV memory per NPU"
    elif fraction > TIGHT_FRACTION:
        verdict, note = BudgetFit.TIGHT, f"the startup KV requirement is over {TIGHT_FRACTION:.0%} of free KV"
    else:
        verdict, note = BudgetFit.FITS, "the startup KV requirement fits with headroom"
    return replace(
        measured,
        verdict=verdict,
        note=note,
        needed_gib=needed,
        max_len_requests=int(pool // (inp.max_model_len * profile.kv_pool_tokens_per_context_token)),
        pool_tokens_per_context_token=profile.kv_pool_tokens_per_context_token,
    )
