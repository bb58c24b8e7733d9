"""`--long-prefill-token-threshold` in aissim's scheduler, step by step as vLLM 0.25.1 schedules it.

vllm/v1/core/sched/scheduler.py caps the tokens one request computes in a step at the threshold, for a running
request (:478-479, a prefill chunk or a speculative decode's 1 + k tokens) and for a waiting one (:827-829),
before the step's remaining budget; without it a long prompt's chunk takes the whole budget and a short prompt
waits behind it. `--max-num-partial-prefills` / `--max-long-partial-prefills` other than 1 do not start
(vllm/engine/arg_utils.py:2369-2379).
"""

import pytest

from aissim.args import UnsupportedFeature, parse_serve_args
from aissim.cli import main
from aissim.kvcache import KVPool, PrefixCache
from aissim.scheduler import Scheduler, SimRequest, StepPlan
from aissim.specdecode import AcceptanceStream
from aissim.tokens import synthetic

BLOCK = 128
MBT = 8192


def _sched(threshold: int, *, k: int = 0) -> Scheduler:
    pool = KVPool(pool_tokens=1_000_000, block_size=BLOCK)
    cache = PrefixCache(capacity_blocks=pool.total_blocks, block_size=BLOCK, enabled=False)
    return Scheduler(
        max_num_seqs=32, max_num_batched_tokens=MBT, num_spec_tokens=k, tp=8, pool=pool, cache=cache,
        long_prefill_token_threshold=threshold,
    )  # fmt: skip


def _req(rid: str, tokens: int, *, out: int = 4, k: int = 0) -> SimRequest:
    accept = AcceptanceStream(rates=(1.0,) * k, seed=1) if k else None
    prompt = synthetic(text=rid, num_tokens=tokens, block_size=BLOCK)
    return SimRequest(rid, prompt, out, out, "length", arrival=0.0, accept=accept)


def _chunks(plan: StepPlan) -> dict[str, int]:
    return {req.rid: end - start for req, start, end in plan.prefill}


def _run(sched: Scheduler, now: float = 0.0) -> StepPlan:
    plan = sched.plan(now=now)
    sched.complete(plan, end=now + 1)
    return plan


@pytest.mark.parametrize(("threshold", "long_chunk", "short_chunks"), [(0, MBT, {}), (2048, 2048, {"s0": 2048})])
def test_a_waiting_long_prompt_takes_at_most_the_threshold(
    threshold: int, long_chunk: int, short_chunks: dict[str, int]
) -> None:
    sched = _sched(threshold)
    sched.add(_req("long", 300_000))
    sched.add(_req("s0", 2048))
    chunks = _chunks(_run(sched))
    assert chunks == {"long": long_chunk, **short_chunks}


def test_without_the_threshold_a_short_prompt_waits_for_the_whole_long_prefill() -> None:
    sched = _sched(0)
    sched.add(_req("long", 64 * 1024))
    _run(sched)
    sched.add(_req("s0", 2048))
    steps = 1
    while "s0" not in _chunks(plan := _run(sched, steps)):
        steps += 1
        assert _chunks(plan) == {"long": MBT}  # the running long prompt takes the whole budget
    assert steps == 8  # 64K is 8 chunks of 8192: the short prompt starts only once the last one is done


def test_with_the_threshold_a_running_long_prompt_leaves_the_rest_of_the_step() -> None:
    sched = _sched(2048)
    sched.add(_req("long", 64 * 1024))
    _run(sched)
    for i in range(3):
        sched.add(_req(f"s{i}", 3000))
    chunks = _chunks(_run(sched, 1))
    # running first, capped (:478-479); then waiting in order, each capped (:827-829), until the budget is out
    assert chunks == {"long": 2048, "s0": 2048, "s1": 2048, "s2": 2048}
    chunks = _chunks(_run(sched, 2))
    assert chunks == {"long": 2048, "s0": 952, "s1": 952, "s2": 952}


def test_the_threshold_caps_a_speculative_decode_and_its_verified_drafts() -> None:
    sched = _sched(4, k=7)
    sched.add(_req("r", 4, out=20, k=7))
    _run(sched)  # prefill (4 tokens, under the cap) and the first token
    plan = sched.plan(now=1.0)
    assert plan.decode
    assert plan.drafts[plan.decode[0]] == 3
    it, emitted = sched.complete(plan, end=2.0)
    assert (it.num_draft_tokens, it.num_accepted_tokens) == (3, 3)  # every draft accepted, only 3 verified
    assert emitted[0][1] == 4


@pytest.mark.parametrize("flag", ["--max-num-partial-prefills", "--max-long-partial-prefills"])
def test_concurrent_partial_prefills_do_not_start(flag: str) -> None:
    """vLLM 0.25.1 on CPU, seen: `NotImplementedError: Concurrent Partial Prefill is not supported. We recommend
    to remove Concurrent Partial Prefill from your config.` and exit 1."""
    with pytest.raises(UnsupportedFeature, match="Concurrent Partial Prefill is not supported"):
        parse_serve_args(["/m", flag, "2"], env={})
    assert main(["serve", "/m", flag, "2"]) == 1
    assert parse_serve_args(["/m", flag, "1"], env={}).max_num_seqs == 256


def _lone_prefill_seconds(threshold: int, tokens: int) -> float:
    sched = _sched(threshold)
    sched.add(_req("long", tokens))
    total = 0.0
    while not sched.running or not sched.running[0].prefill_done:
        plan = sched.plan(now=total)
        total += sched.step_seconds(plan)
        sched.complete(plan, end=total)
    return total


def test_a_capped_lone_prefill_pays_a_whole_forward_per_step() -> None:
    """The clean-prefill table was measured in 8192-token steps, each with its fixed forward cost spread over its
    tokens; capped at 512 tokens a 300K prompt takes 586 steps, each still one forward, so it costs more than
    the table, not the same (the seed's 8K-step figures stay exact without the threshold)."""
    from aissim import calibration as cal

    table = cal.prefill_cumulative_s(context=300_000, tp=8)
    assert _lone_prefill_seconds(0, 64 * 1024) == pytest.approx(10.17)  # docs/FACTS.md 64K TP8, 8 full steps
    capped = _lone_prefill_seconds(512, 300_000)
    steps = -(-300_000 // 512)
    assert capped == pytest.approx(table + steps * cal.forward_fixed_s(tp=8) * (1 - 512 / 8192), rel=1e-5)
    assert capped / table > 1.3  # ~40 ms x 586 steps on a ~70 s prefill
