"""A P/D split's two pool counts: each pool's own decision, then the decode-per-prefill ratio between them.

Why a step of its own after each pool decided: the pools scale on different signals (autoscale/decide.py
reads prompt tokens queued and TTFT for prefill; slots, KV and TPOT for decode), so each decides alone, on
its own windows, what it wants; only the pair can keep the two counts within the user's ratio bound
(spec.autoscaling.pd.decodePerPrefill, Kthena's `ratioConstraint`). The rule, so the pair never starves:
an ask beyond the ratio pulls the other pool up with it (up to its maxReplicas) and is capped only when it
cannot; a pool's scale-down that would leave the ratio is held. No I/O, no clock.
"""

import math
from dataclasses import dataclass

from ascend_operator.api.autoscaling import RATIO_EPS as EPS
from ascend_operator.api.autoscaling import AutoscalingSpec, PdAutoscaling, ScaleReason


@dataclass(frozen=True, kw_only=True)
class PoolAsk:
    """One pool as the parent sees it: its engines now, and what its own decision asks (None: none yet)."""

    current: int
    proposed: int | None = None


@dataclass(frozen=True, kw_only=True)
class PoolCount:
    """The engines a pool gets; `held` says why, when the ratio changed what the pool asked."""

    replicas: int
    asked: int
    held: str | None = None

    @property
    def reason(self) -> ScaleReason | None:
        return ScaleReason.RATIO_BOUND if self.held else None


def _clamp(n: int, spec: AutoscalingSpec) -> int:
    return max(spec.min_replicas, min(spec.max_replicas, n))


def resolve(prefill: PoolAsk, decode: PoolAsk, spec: AutoscalingSpec) -> tuple[PoolCount, PoolCount]:
    """Each pool's engines: its ask within its bounds, then the ratio (the pool short of it pulled up)."""
    pf, dc = spec.pool("prefill"), spec.pool("decode")
    ratio = (spec.pd or PdAutoscaling()).decode_per_prefill
    p_ask = _clamp(prefill.current if prefill.proposed is None else prefill.proposed, pf)
    d_ask = _clamp(decode.current if decode.proposed is None else decode.proposed, dc)
    p, d = p_ask, d_ask
    if d > ratio.at_most * p + EPS:  # too few prefill engines for the decode ones: prefill up, else decode capped
        p = min(pf.max_replicas, max(p, math.ceil(d / ratio.at_most - EPS)))
        d = max(dc.min_replicas, min(d, math.floor(ratio.at_most * p + EPS)))
    elif d < ratio.at_least * p - EPS:  # too few decode engines for the prefill ones: decode up, else prefill capped
        d = min(dc.max_replicas, max(d, math.ceil(ratio.at_least * p - EPS)))
        p = max(pf.min_replicas, min(p, math.floor(d / ratio.at_least + EPS)))
    bound = f"decode per prefill {ratio.at_least:g}..{ratio.at_most:g}"
    return (
        PoolCount(
            replicas=p,
            asked=p_ask,
            held=None if p == p_ask else f"prefill asks {p_ask}, gets {p}: {bound} with decode at {d}",
        ),
        PoolCount(
            replicas=d,
            asked=d_ask,
            held=None if d == d_ask else f"decode asks {d_ask}, gets {d}: {bound} with prefill at {p}",
        ),
    )
