"""Every figure the engine simulator is calibrated to, in one place, each cited to the seed write-up.

Why this module exists: the simulator stands in for DeepSeek-V4-Flash on vLLM-Ascend on one Atlas 800 A2
server; tests, detectors and demos only mean something if its timings, KV capacity and speculative
acceptance come from the measured figures (docs/FACTS.md / docs/seed/000_*.txt), not from numbers made up per module.
All functions here are pure: engine time in, engine time out. The time-scale factor is applied elsewhere.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ascend_operator.api.profiles import load_profiles

KIB_PER_GIB = 1024 * 1024

# ---------------------------------------------------------------------------------------------------
# Prefill: docs/FACTS.md "Clean C1 prefill time (TTFT) by context" (engine TTFT, concurrency 1, fresh prompts).
# The cumulative prefill time T(L) is interpolated piecewise-linearly through (0, 0) and these points;
# a chunk [c0, c1) costs T(c1) - T(c0), so chunked prefill of a clean C1 request sums to the table.
# ---------------------------------------------------------------------------------------------------
TP8_PREFILL_S: tuple[tuple[int, float], ...] = (
    (8 * 1024, 1.62),  # docs/FACTS.md: 8K TP8 1.62 s
    (32 * 1024, 5.05),  # 32K TP8 5.05 s
    (64 * 1024, 10.17),  # 64K TP8 10.17 s
    (128 * 1024, 22.40),  # 128K TP8 22.40 s
    (256 * 1024, 54.82),  # 256K TP8 54.82 s
    (512 * 1024, 148.76),  # 512K TP8 148.76 s
)
TP4_PREFILL_S: tuple[tuple[int, float], ...] = (
    (8 * 1024, 2.02),  # docs/FACTS.md: 8K DP2 x TP4 2.02 s
    (32 * 1024, 7.18),  # 32K 7.18 s
    (64 * 1024, 14.25),  # 64K 14.25 s
    (128 * 1024, 30.77),  # 128K 30.77 s
    (256 * 1024, 72.38),  # 256K 72.38 s; 512K "no stable result": extrapolated from the last segment
)

# ---------------------------------------------------------------------------------------------------
# Decode: docs/FACTS.md "TP8 concurrency sweep" mean TPOT by concurrency (C1..C32 are running batches; the C64
# row runs 32 slots and is the slot-limited case the scheduler reproduces by itself).
# ---------------------------------------------------------------------------------------------------
TP8_TPOT_S: tuple[tuple[int, float], ...] = (
    (1, 0.0142),  # C1 14.2 ms
    (8, 0.0275),  # C8 27.5 ms
    (16, 0.0355),  # C16 35.5 ms
    (32, 0.0505),  # C32 50.5 ms
)
# The sweep's published throughput, used by the sweep test and perf/sim_sweep.py as the target.
TP8_SWEEP: dict[int, tuple[float, float]] = {
    # concurrency: (output tok/s, mean TPOT s) - docs/FACTS.md "TP8 concurrency sweep"
    1: (66.5, 0.0142),
    8: (264.5, 0.0275),
    16: (405.4, 0.0355),
    32: (583.5, 0.0505),
    64: (563.8, 0.0540),
}
# The sweep's workload is not given ("another workload"). Its C32 mean TTFT of 1.45 s is about one full
# 8192-token prefill step (1.62 s), i.e. 32 prompts of ~256 tokens; output 512 as in the seed's synthetic
# runs (C1: 512 / (TTFT + 511 x 14.2 ms) ~= 66.5 tok/s fits too). The sweep test and bench use this shape.
SWEEP_PROMPT_TOKENS = 256
SWEEP_OUTPUT_TOKENS = 512
# DP2 x TP4: docs/FACTS.md "TP8 vs DP2 x TP4": C1 TPOT 21.0 ms vs 23.0 ms (a TP4 step is ~9% cheaper alone), and
# "step cost per token" 1.84 vs 0.80 ms (each extra sequence costs more on TP4). The batch slope ratio is
# fitted so DP2 x TP4 at C64 lands on docs/FACTS.md "DP2 x TP4 at C64 ... mean 820.04 tok/s" (perf/sim_sweep.py).
TP4_C1_STEP_RATIO = 21.0 / 23.0
TP4_BATCH_SLOPE_RATIO = 1.68
DP2_TP4_C64_TOKS = 820.04

# ---------------------------------------------------------------------------------------------------
# KV cache: docs/FACTS.md "Memory / KV budget (per NPU)".
# ---------------------------------------------------------------------------------------------------
# The figures are the model profile's (ascend_operator/data/model_profiles.yaml, each cited there), the same
# copy `aisctl plan` and the operator's budget check read: one number per fact. aissim plays the seed's model;
# its one-node layouts are keyed here by tensor-parallel size (TP8 x DP1 and TP4 x DP2).
PROFILE = "deepseek-v4-flash-w8a8"  # the model aissim plays: the seed's (its examples name this profile)
_MODEL = load_profiles()[PROFILE]
_LAYOUTS = {layout.tensor: layout for layout in _MODEL.layouts if layout.nodes == 1}
REFERENCE_UTILIZATION = _MODEL.measured_at_utilization  # production --gpu-memory-utilization 0.90
# "GPU KV cache size: 1,078,120 tokens" (TP8), ~941K (DP2 x TP4), at the reference utilization
KV_POOL_TOKENS_MEASURED = {tp: layout.kv_pool_tokens for tp, layout in _LAYOUTS.items()}
KV_FREE_GIB_MEASURED = {tp: layout.free_kv_gib for tp, layout in _LAYOUTS.items()}  # ~13.8 GiB | ~12.1 GiB
# weights + activation + non-torch + graph: 39.10+1.44+0.46+1.07 (TP8), 40.47+1.69+0.56+1.11 (TP4)
KV_FIXED_GIB = {tp: layout.fixed_gib for tp, layout in _LAYOUTS.items()}
# "With DSA-CP on, KV capacity drops to ~969K (TP8) / ~799K (DP2 x TP4)"
DSA_CP_KV_POOL_TOKENS = {tp: layout.kv_pool_tokens_long_context for tp, layout in _LAYOUTS.items()}
# Hybrid KV (docs/FACTS.md "Logs disagree by design"): the reported kv_cache_usage_perc follows the group that
# fills first, not tokens / 1.078M, so each context token costs more than one pool token (2.03, bounded
# 1.80-2.06 by the seed in the profile). 2.03 puts a baseline 512K prompt at ~98.7%, so the `stall-at-kv` fault
# catches it exactly where the seed's engine stopped (97.5%), and without the fault it completes as the seed's
# baseline did.
KV_POOL_TOKENS_PER_CONTEXT_TOKEN = _MODEL.kv_pool_tokens_per_context_token
# Startup requirement fitted in the seed: needed_KV ~= 8.15 KiB x max_model_len + 553 KiB x MBT
# (docs/FACTS.md "Startup requirement"; MBT 32768 "does not start").
STARTUP_KIB_PER_MODEL_LEN_TOKEN = _MODEL.startup_kib_per_model_len_token
STARTUP_KIB_PER_BATCHED_TOKEN = _MODEL.startup_kib_per_batched_token
# KV transfer between a prefill and a decode engine (P/D): the seed measured none. An Atlas 800 A2 has one
# 200GE RoCE port per NPU, 25 GB/s at line rate; Mooncake moves less than line rate, so this is a lower bound
# on transfer time and a knob (`--sim-kv-transfer-gbps`), not a figure.
KV_LINK_GBPS = 25.0

# ---------------------------------------------------------------------------------------------------
# Speculative decoding (DSpark): docs/FACTS.md "Speculative decoding".
# ---------------------------------------------------------------------------------------------------
# Real reasoning traffic, per-position acceptance #1..#7 (acceptance length 2.214 = 1 + sum).
REAL_ACCEPTANCE_PER_POSITION = (0.532, 0.291, 0.164, 0.098, 0.063, 0.041, 0.024)
# Synthetic short requests: acceptance length by num_speculative_tokens (7: 4.158 / 45.11%, 6: 4.120,
# 5: 3.805). Per-position rates are modelled as a geometric decay a^i fitted to that length.
SYNTHETIC_ACCEPTANCE_LENGTH = {7: 4.158, 6: 4.120, 5: 3.805}
# The same runs' mean TPOT by num_speculative_tokens (86.7 / 86.5 / 87.0 ms): per output token, so one step of
# verification width w = k + 1 costs TPOT x acceptance length (what every running request advances per step).
SYNTHETIC_TPOT_S = {7: 0.0867, 6: 0.0865, 5: 0.0870}
# The step's cost as a function of its width, step(w) = a + b w, least squares through the three runs
# (tests/sim/test_calibration.py refits it): the widths 8 / 7 / 6 cost 360.5 / 356.4 / 331.0 ms; the line is
# a = 246.2 ms, b = 14.73 ms per verified token, fitted 364.0 / 349.3 / 334.6 ms, residuals -3.5 / +7.1 /
# -3.5 ms (-1.0% / +2.0% / -1.1%), residual standard error 8.7 ms, so b = 14.7 +- 6.1 ms (one s.e.). A step
# without speculative decoding (w = 1, the target model's forward alone, no draft passes) extrapolates to
# a + b = 260.9 ms, 0.717 of a DSpark7 step; +-1 s.e. of the slope moves that to 0.61..0.83. The runs are at
# one batch (C64); the ratio fit(w) / fit(8) is applied at every batch size, an assumption the seed cannot check.
STEP_WIDTH_FIT_S = (0.246182, 0.014732)

# ---------------------------------------------------------------------------------------------------
# Faults: docs/FACTS.md "Operations" and "DSA-CP" figures.
# ---------------------------------------------------------------------------------------------------
STALL_KV_THRESHOLD = 0.975  # "KV usage went ... -> 97.5%, then forward progress stopped"
DRIFT_FRACTION = 0.18  # "fell from ~820 to ~695 tok/s (~18%) after a long uptime"
DRIFT_PERIOD_S = 24 * 3600.0  # "long uptime": the seed gives no duration; one day is this module's choice

VLLM_VERSION = "0.25.1"  # docs/FACTS.md "Hardware and software": vLLM 0.25.1


def _interp(points: Sequence[tuple[int, float]], x: float) -> float:
    """Piecewise-linear through the points, extrapolating with the first / last segment's slope."""
    xs = [p[0] for p in points]
    i = bisect.bisect_left(xs, x)
    if i <= 0:
        (x0, y0), (x1, y1) = points[0], points[1]
    elif i >= len(points):
        (x0, y0), (x1, y1) = points[-2], points[-1]
    else:
        (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _column(tp: int) -> int:
    """The seed measured TP8 and DP2 x TP4; TP4 uses its column, every other TP size the TP8 one."""
    return 4 if tp == 4 else 8


def prefill_cumulative_s(*, context: int, tp: int) -> float:
    """Engine seconds to prefill a clean prompt of `context` tokens from scratch (the C1 TTFT)."""
    if context <= 0:
        return 0.0
    table = TP4_PREFILL_S if _column(tp) == 4 else TP8_PREFILL_S
    first_len, first_s = table[0]
    if context <= first_len:
        return first_s * context / first_len
    return _interp(table, context)


def prefill_chunk_s(*, start: int, end: int, tp: int) -> float:
    """Engine seconds for a prefill chunk covering prompt positions [start, end)."""
    return prefill_cumulative_s(context=end, tp=tp) - prefill_cumulative_s(context=start, tp=tp)


def decode_tpot_s(*, batch: int, tp: int) -> float:
    """Per-token decode latency at this running batch size, as the seed's sweep measured it."""
    if batch <= 0:
        return 0.0
    tp8 = _interp(TP8_TPOT_S, float(batch))
    if _column(tp) == 8:
        return tp8
    c1 = TP8_TPOT_S[0][1]
    return TP4_C1_STEP_RATIO * c1 + TP4_BATCH_SLOPE_RATIO * (tp8 - c1)


def kv_free_gib(*, utilization: float, tp: int) -> float:
    """KV memory per NPU at a --gpu-memory-utilization, from the seed's budget at 0.90."""
    col = _column(tp)
    usable = (KV_FREE_GIB_MEASURED[col] + KV_FIXED_GIB[col]) / REFERENCE_UTILIZATION
    return max(0.0, utilization * usable - KV_FIXED_GIB[col])


def kv_pool_tokens(*, utilization: float, tp: int) -> int:
    """The engine's logged KV size in tokens (1,078,120 for TP8 at 0.90), scaled with memory utilization."""
    col = _column(tp)
    ratio = kv_free_gib(utilization=utilization, tp=tp) / KV_FREE_GIB_MEASURED[col]
    return int(KV_POOL_TOKENS_MEASURED[col] * ratio)


def kv_bytes_per_context_token(*, tp: int) -> float:
    """Bytes of KV one NPU holds per context token: its KV memory over the context the pool holds (DeepSeek's
    MLA latent cache is whole on every TP rank, so each rank of a decode engine pulls this much per token
    from one rank of the prefill engine, all ranks at once)."""
    col = _column(tp)
    context_tokens = KV_POOL_TOKENS_MEASURED[col] / KV_POOL_TOKENS_PER_CONTEXT_TOKEN
    return KV_FREE_GIB_MEASURED[col] * 1024**3 / context_tokens


def kv_transfer_s(*, tokens: int, tp: int, gbps: float) -> float:
    """Engine seconds to move a prompt's KV from a prefill engine to a decode engine over links of `gbps`
    GB/s per NPU (the ranks pull in parallel, so one rank's share sets the time)."""
    return tokens * kv_bytes_per_context_token(tp=tp) / (gbps * 1e9)


def startup_kv_need_gib(*, max_model_len: int, max_num_batched_tokens: int) -> float:
    """KV memory the engine needs to start with this admission limit and batch budget."""
    kib = STARTUP_KIB_PER_MODEL_LEN_TOKEN * max_model_len + STARTUP_KIB_PER_BATCHED_TOKEN * max_num_batched_tokens
    return kib / KIB_PER_GIB


def _geometric_rates(*, k: int, mean_accepted: float) -> tuple[float, ...]:
    """Rates a, a^2, ..., a^k whose sum is mean_accepted (bisection on a)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        total = sum(mid**i for i in range(1, k + 1))
        lo, hi = (mid, hi) if total < mean_accepted else (lo, mid)
    a = (lo + hi) / 2
    return tuple(a**i for i in range(1, k + 1))


def acceptance_rates(*, profile: str, k: int) -> tuple[float, ...]:
    """P(draft position i is accepted) for i in 0..k-1; decreasing, since acceptance is a prefix."""
    if k <= 0:
        return ()
    if profile == "real":
        base = list(REAL_ACCEPTANCE_PER_POSITION)
        ratio = base[-1] / base[-2]
        while len(base) < k:
            base.append(base[-1] * ratio)
        return tuple(base[:k])
    if profile == "synthetic":
        length = SYNTHETIC_ACCEPTANCE_LENGTH.get(k)
        if length is None:
            a = _geometric_rates(k=7, mean_accepted=SYNTHETIC_ACCEPTANCE_LENGTH[7] - 1)[0]
            return tuple(a**i for i in range(1, k + 1))
        return _geometric_rates(k=k, mean_accepted=length - 1)
    raise ValueError(f"unknown acceptance profile {profile!r} (expected 'real' or 'synthetic')")


def step_width_factor(width: int) -> float:
    """A decode step's cost at verification width `width` (1 + drafts) over a DSpark7 step's (width 8), from
    the straight line fitted through the seed's DSpark5/6/7 runs (STEP_WIDTH_FIT_S)."""
    a, b = STEP_WIDTH_FIT_S
    return (a + b * width) / (a + b * 8)


#: The seed's clean-prefill figures were measured in steps of this many tokens (the production MBT).
REFERENCE_PREFILL_STEP_TOKENS = 8192


def forward_fixed_s(*, tp: int) -> float:
    """The part of one forward pass that no token count removes: a one-sequence DSpark7 step (14.2 ms x 4.158
    = 59.0 ms on TP8) at verification width 0 on the fitted line, a / (a + 8 b) = 0.676 of it, ~39.9 ms (the
    same assumption decode_step_s makes: the C64 fit's ratio holds at batch 1)."""
    return decode_tpot_s(batch=1, tp=tp) * SYNTHETIC_ACCEPTANCE_LENGTH[7] * step_width_factor(0)


def prefill_step_overhead_s(*, tokens: int, tp: int) -> float:
    """What a prefill-only step of fewer than REFERENCE_PREFILL_STEP_TOKENS tokens costs beyond its tokens'
    share of the clean-prefill table. The table spreads each 8192-token step's fixed forward cost over its
    tokens (8K = one step, 1.62 s); a smaller step (a long prompt capped by `--long-prefill-token-threshold`,
    a lone short prompt) still runs one whole forward, so it pays the fixed part its tokens do not carry.
    Without this, 600 steps of 512 tokens cost what 38 steps of 8192 do: kinder than the engine."""
    share = max(0.0, 1.0 - tokens / REFERENCE_PREFILL_STEP_TOKENS)
    return forward_fixed_s(tp=tp) * share


def decode_step_s(*, batch: int, tp: int, num_speculative_tokens: int) -> float:
    """Engine seconds of one decode step for `batch` running sequences.

    The seed's TPOT figures are per output token on synthetic benchmark traffic with DSpark7, so a DSpark7
    step costs TPOT x the synthetic profile's tokens per step (4.158); a real-traffic profile then yields
    fewer tokens per step and a higher TPOT, as the seed observed. Another width (1 + k, k = 0 without
    speculative decoding) costs that step times step_width_factor: derived from the seed's DSpark5/6/7 runs,
    not assumed (without speculative decoding a step is 0.717 of a DSpark7 step and advances one token).
    """
    dspark7_step = decode_tpot_s(batch=batch, tp=tp) * SYNTHETIC_ACCEPTANCE_LENGTH[7]
    return dspark7_step * step_width_factor(1 + max(0, num_speculative_tokens))
