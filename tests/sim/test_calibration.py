"""The simulator's calibration reproduces the seed's figures (pure functions, no server)."""

from __future__ import annotations

import pytest

from aissim import calibration as cal
from aissim.args import parse_serve_args
from aissim.kvcache import KVPool
from aissim.runtime import startup_error
from aissim.specdecode import AcceptanceStream


def test_kv_pool_matches_the_seed_budget_and_scales_with_memory_utilization() -> None:
    assert cal.kv_pool_tokens(utilization=0.90, tp=8) == 1_078_120
    assert cal.kv_pool_tokens(utilization=0.90, tp=4) == 941_000
    more = cal.kv_pool_tokens(utilization=0.95, tp=8)
    less = cal.kv_pool_tokens(utilization=0.85, tp=8)
    assert less < 1_078_120 < more
    # 5 points of a ~62 GiB NPU are ~3.1 GiB, i.e. ~22% of the 13.8 GiB KV budget.
    assert more / 1_078_120 == pytest.approx(1 + 0.05 * 62.08 / 13.8, rel=0.01)


def test_a_512k_prompt_fits_the_baseline_pool_but_passes_the_stall_point() -> None:
    baseline = KVPool(pool_tokens=cal.kv_pool_tokens(utilization=0.90, tp=8), block_size=128)
    baseline.grow("long", 512 * 1024)
    assert cal.STALL_KV_THRESHOLD < baseline.usage < 1.0  # seed: completes without DSA-CP
    dsa_cp = KVPool(pool_tokens=cal.DSA_CP_KV_POOL_TOKENS[8], block_size=128)
    assert not dsa_cp.can_grow("long", 512 * 1024)  # seed: with DSA-CP, 512K never finished
    assert dsa_cp.can_grow("long", 256 * 1024)  # seed: 256K passes


def test_startup_refuses_the_mbt_the_seed_could_not_start() -> None:
    base = ["/m", "--max-model-len", str(512 * 1024), "--tensor-parallel-size", "8"]
    assert startup_error(parse_serve_args([*base, "--max-num-batched-tokens", "8192"], env={})) is None
    assert startup_error(parse_serve_args([*base, "--max-num-batched-tokens", "16384"], env={})) is None
    error = startup_error(parse_serve_args([*base, "--max-num-batched-tokens", "32768"], env={}))
    assert error is not None
    assert "KV cache" in error
    # docs/FACTS.md table: ~8.6 / ~12.9 / ~21.6 GiB needed for MBT 8192 / 16384 / 32768 at ~512K.
    need = cal.startup_kv_need_gib(max_model_len=512 * 1024, max_num_batched_tokens=32768)
    assert need == pytest.approx(21.6, rel=0.02)


def test_prefill_time_follows_the_clean_c1_table_and_is_additive_over_chunks() -> None:
    for context, seconds in cal.TP8_PREFILL_S:
        assert cal.prefill_cumulative_s(context=context, tp=8) == pytest.approx(seconds)
        chunks = sum(cal.prefill_chunk_s(start=s, end=min(s + 8192, context), tp=8) for s in range(0, context, 8192))
        assert chunks == pytest.approx(seconds)
    assert cal.prefill_cumulative_s(context=64 * 1024, tp=4) == pytest.approx(14.25)


def test_real_acceptance_profile_gives_the_seed_acceptance_length() -> None:
    rates = cal.acceptance_rates(profile="real", k=7)
    assert rates == cal.REAL_ACCEPTANCE_PER_POSITION
    assert 1 + sum(rates) == pytest.approx(2.214, abs=0.002)  # docs/FACTS.md: mean acceptance length 2.214
    stream = AcceptanceStream(rates=rates, seed=12345)
    draws = [stream.next_accepted() for _ in range(2000)]
    assert 1 + sum(draws) / len(draws) == pytest.approx(2.214, abs=0.02)
    for pos, rate in enumerate(rates):
        assert sum(d > pos for d in draws) / len(draws) == pytest.approx(rate, abs=0.01)


@pytest.mark.parametrize(("k", "length", "rate"), [(7, 4.158, 0.4511), (6, 4.120, 0.52), (5, 3.805, 0.5611)])
def test_synthetic_profile_matches_the_dspark_table(k: int, length: float, rate: float) -> None:
    rates = cal.acceptance_rates(profile="synthetic", k=k)
    assert 1 + sum(rates) == pytest.approx(length, abs=0.005)
    assert sum(rates) / k == pytest.approx(rate, abs=0.005)
    assert list(rates) == sorted(rates, reverse=True)


def test_decode_step_reproduces_the_sweep_tpot_on_synthetic_traffic() -> None:
    for batch, tpot in cal.TP8_TPOT_S:
        step = cal.decode_step_s(batch=batch, tp=8, num_speculative_tokens=7)
        assert step / cal.SYNTHETIC_ACCEPTANCE_LENGTH[7] == pytest.approx(tpot, rel=0.001)
    # DP2 x TP4: a lone TP4 step is cheaper (21.0 vs 23.0 ms), a full batch dearer (1.84 vs 0.80 ms/token).
    assert cal.decode_tpot_s(batch=1, tp=4) < cal.decode_tpot_s(batch=1, tp=8)
    assert cal.decode_tpot_s(batch=32, tp=4) > cal.decode_tpot_s(batch=32, tp=8)


def _least_squares(points: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def test_step_cost_by_width_is_the_line_through_the_seeds_dspark_runs() -> None:
    """step(w) = TPOT x acceptance length of the DSpark5/6/7 runs (docs/FACTS.md "Speculative decoding"),
    refitted here; the residuals are the ones calibration.py states."""
    points = [(k + 1.0, cal.SYNTHETIC_TPOT_S[k] * cal.SYNTHETIC_ACCEPTANCE_LENGTH[k]) for k in (5, 6, 7)]
    a, b = _least_squares(points)
    assert (a, b) == pytest.approx(cal.STEP_WIDTH_FIT_S, abs=1e-6)
    residuals = [round((y - (a + b * w)) * 1000, 1) for w, y in points]
    assert residuals == [-3.5, 7.1, -3.5]
    assert cal.step_width_factor(1) == pytest.approx(0.717, abs=0.001)


def test_without_speculative_decoding_a_step_is_cheaper_but_tokens_come_slower() -> None:
    """A DSpark7 step costs more than a plain one, and on the seed's real traffic (2.214 tokens per step)
    still yields more tokens per second: dropping DSpark must not look faster (issue 39)."""
    for batch in (1, 8, 32):
        plain = cal.decode_step_s(batch=batch, tp=8, num_speculative_tokens=0)
        dspark = cal.decode_step_s(batch=batch, tp=8, num_speculative_tokens=7)
        assert plain == pytest.approx(dspark * 0.717, rel=0.001)
        real_length = 1 + sum(cal.REAL_ACCEPTANCE_PER_POSITION)
        assert real_length / dspark > 1.5 / plain
