"""A P/D split's pools scaling apart (issue 40 item 2): each pool's want reads only its own side's signals
(prefill: prompt tokens queued and TTFT; decode: slots, KV and TPOT), and the pair's counts stay within the
user's decode-per-prefill ratio, the pool short of it pulled up, a scale-down past it held. What a user
would notice: a prefill-heavy load adds prefill engines and not decode ones, a decode-heavy load the other
way round, and the ratio bound is never left while both pools are within their bounds."""

from typing import Any

import pytest

from ascend_operator.api.autoscaling import (
    AutoscalingSpec,
    AutoscalingTargets,
    PdAutoscaling,
    PoolAutoscaling,
    PoolRatio,
    ScaleReason,
)
from ascend_operator.autoscale import PoolAsk, ScaleHistory, Signals, decide, need, observe, resolve, wanted

POOLS = PdAutoscaling(
    prefill=PoolAutoscaling(min_replicas=1, max_replicas=4),
    decode=PoolAutoscaling(min_replicas=1, max_replicas=6),
    decode_per_prefill=PoolRatio(at_least=0.5, at_most=2),
)
SPEC = AutoscalingSpec(
    min_replicas=1,
    max_replicas=8,
    scale_up_window_seconds=10,
    panic_window_seconds=4,
    scale_down_window_seconds=30,
    pd=POOLS,
)


@pytest.mark.parametrize(
    ("prefill", "decode", "spec", "want", "held"),
    [
        # asks within the ratio: each pool gets what it asked
        ((1, 2), (1, 2), SPEC, (2, 2), (False, False)),
        ((2, None), (3, None), SPEC, (2, 3), (False, False)),
        # decode asks 5 with prefill at 1 (at most 2 per prefill): prefill pulled up to 3
        ((1, 1), (2, 5), SPEC, (3, 5), (True, False)),
        # prefill asks 4 with decode at 1 (at least 0.5 per prefill): decode pulled up to 2
        ((1, 4), (1, 1), SPEC, (4, 2), (False, True)),
        # decode wants to drop to 1 while prefill stays at 4: held at 2
        ((4, 4), (3, 1), SPEC, (4, 2), (False, True)),
        # the pull is capped by the other pool's maxReplicas: decode capped instead
        (
            (1, 1),
            (2, 6),
            SPEC.model_copy(update={"pd": POOLS.model_copy(update={"prefill": PoolAutoscaling(max_replicas=2)})}),
            (2, 4),
            (True, True),
        ),
        # asks are brought inside each pool's bounds first
        ((1, 9), (1, 0), SPEC, (4, 2), (False, True)),
        # no decision yet: the current counts, ratio applied
        ((1, None), (5, None), SPEC, (3, 5), (True, False)),
        # the ratio's float edges: 0.1 x 30 is 3.0000000000000004, still within at most 0.1
        (
            (30, None),
            (3, None),
            AutoscalingSpec(
                max_replicas=64,
                pd=PdAutoscaling(decode_per_prefill=PoolRatio(at_least=0.1, at_most=0.1)),
            ),
            (30, 3),
            (False, False),
        ),
    ],
)
def test_the_ratio_pulls_the_short_pool_up_and_holds_a_scale_down(
    prefill: tuple[int, int | None],
    decode: tuple[int, int | None],
    spec: AutoscalingSpec,
    want: tuple[int, int],
    held: tuple[bool, bool],
) -> None:
    p, d = resolve(
        PoolAsk(current=prefill[0], proposed=prefill[1]), PoolAsk(current=decode[0], proposed=decode[1]), spec
    )
    assert (p.replicas, d.replicas) == want
    assert (p.held is not None, d.held is not None) == held
    assert all(c.reason is (ScaleReason.RATIO_BOUND if c.held else None) for c in (p, d))


def _signals(role: str, **fields: Any) -> Signals:
    base: dict[str, Any] = {"replicas": 1, "ready": 1, "answering": 1, "slots": 8, "role": role}
    return Signals(**{**base, **fields})


@pytest.mark.parametrize(
    ("signals", "load", "why"),
    [
        # a prefill pool: its queue of prompt tokens, never its running/waiting count over decode slots
        (_signals("prefill", waiting=12, running=2, prompt_backlog=12 * 8192), 6.0, "prompt tokens queued"),
        (_signals("prefill", waiting=0, running=2, prompt_backlog=0, kv_usage=0.99), 0.0, "prompt tokens queued"),
        (_signals("prefill", prompt_backlog=0, ttft_p90=3.0), 2.0, "TTFT p90"),
        # a decode pool: slots, KV, TPOT; a TTFT target is not its own (the prefill pool's)
        (_signals("decode", running=8, waiting=12), 2.0, "queue"),
        (_signals("decode", running=2, ready=2, replicas=2, kv_usage=0.95), 2 * 0.95 / 0.9, "KV usage"),
        (_signals("decode", running=1, tpot_p90=0.2), 2.0, "TPOT p90"),
        (_signals("decode", running=1, ttft_p90=30.0), 1 / 10, "queue"),
    ],
)
def test_each_pool_reads_only_its_own_side(signals: Signals, load: float, why: str) -> None:
    targets = AutoscalingTargets(ttft_p90_seconds=2.0, tpot_p90_seconds=0.1, queued_prompt_tokens_per_replica=16384)
    got, said = need(signals, AutoscalingSpec(max_replicas=8, targets=targets))
    assert got == pytest.approx(load)
    assert why in said


def test_a_prefill_heavy_then_decode_heavy_load_moves_the_pools_apart() -> None:
    """Both pools decide on their own windows, the parent applies the ratio, as controller/disaggregation.py
    does, one pass every 2 s: long prompts (a deep prompt queue, decode slots idle) then short prompts with long answers
    (decode slots full, nothing queued for prefill)."""
    pools = {"prefill": 1, "decode": 1}
    windows = {"prefill": ScaleHistory(), "decode": ScaleHistory()}
    trace: list[tuple[str, int, int]] = []
    phases = [("prefill-heavy", 60), ("decode-heavy", 60)]
    now = 1000.0
    for phase, seconds in phases:
        for _ in range(int(seconds / 2)):
            asks: dict[str, int] = {}
            for role in pools:
                if phase == "prefill-heavy":
                    s = _signals(
                        role,
                        replicas=pools[role],
                        ready=pools[role],
                        answering=pools[role],
                        waiting=20 if role == "prefill" else 0,
                        running=pools[role] * 2,
                        prompt_backlog=20 * 8192 if role == "prefill" else None,
                    )
                else:
                    s = _signals(
                        role,
                        replicas=pools[role],
                        ready=pools[role],
                        answering=pools[role],
                        running=2 if role == "prefill" else 8 * pools[role],
                        waiting=0 if role == "prefill" else 30,
                        prompt_backlog=0 if role == "prefill" else None,
                    )
                spec = SPEC.pool(role)
                windows[role] = observe(windows[role], s, spec, now=now)
                asks[role] = decide(s, windows[role], spec, now).desired
            p, d = resolve(
                PoolAsk(current=pools["prefill"], proposed=asks["prefill"]),
                PoolAsk(current=pools["decode"], proposed=asks["decode"]),
                SPEC,
            )
            for role, count in (("prefill", p.replicas), ("decode", d.replicas)):
                if count != pools[role]:
                    windows[role] = ScaleHistory(windows[role].wants, last_scale=now, scaled_down=count < pools[role])
                    pools[role] = count
            trace.append((phase, pools["prefill"], pools["decode"]))
            now += 2
    end_of = {phase: next(t for t in reversed(trace) if t[0] == phase)[1:] for phase, _ in phases}
    assert end_of["prefill-heavy"] == (4, 2)  # prefill to its max, decode pulled to the ratio's least
    assert end_of["decode-heavy"][1] == 6  # decode to its max
    assert end_of["decode-heavy"][0] == 3  # prefill at the least that 6 decode allow, not back to 1
    for _, p_count, d_count in trace:
        assert 0.5 * p_count <= d_count <= 2 * p_count


def test_a_pool_spec_takes_its_own_bounds_and_targets_and_the_shared_windows() -> None:
    spec = SPEC.model_copy(
        update={
            "pd": POOLS.model_copy(update={"decode": PoolAutoscaling(targets=AutoscalingTargets(kv_cache_usage=0.5))})
        }
    )
    decode = spec.pool("decode")
    assert (decode.min_replicas, decode.max_replicas, decode.targets.kv_cache_usage) == (1, 8, 0.5)
    assert decode.scale_up_window_seconds == 10
    assert decode.pd is None
    assert wanted(_signals("decode", kv_usage=0.75), decode)[0] == 2
