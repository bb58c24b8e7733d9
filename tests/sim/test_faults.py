"""Faults make the simulator fail the way the seed's engine did while its HTTP server looked healthy."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from aissim import calibration as cal
from tests.sim.conftest import MODEL, Sim, SimFactory, base_args, until

PROGRESS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:iteration_tokens_total_count")


def long_context_args(*extra: str, scale: float = 1000.0, spec: bool = True) -> list[str]:
    argv = base_args(*extra, scale=scale, spec=spec)
    argv[argv.index("--max-model-len") + 1] = "600000"  # admission limit above 512K, as in the seed's test
    return argv


async def wait_for(predicate: Callable[[], Awaitable[bool]], *, within: float = 10.0) -> None:
    """Poll an HTTP-observable condition (there is no event to await across the socket)."""
    async with asyncio.timeout(within):
        for _ in range(100_000):
            if await predicate():
                return
            await asyncio.sleep(0.02)


async def assert_http_alive(s: Sim) -> None:
    for path in ("/health", "/v1/models", "/metrics"):
        async with s.session.get(s.base + path) as resp:
            assert resp.status == 200, path


async def canary_times_out(s: Sim) -> bool:
    """The operator's generation canary: a few input tokens, a few output tokens, strict timeout."""
    try:
        async with s.session.post(
            s.base + "/v1/completions",
            json={"model": MODEL, "prompt": "ping", "max_tokens": 4},
            timeout=aiohttp.ClientTimeout(total=0.3),
        ) as resp:
            await resp.read()
    except TimeoutError:
        return True
    return False


async def test_stall_at_kv_with_a_512k_request(sim: SimFactory) -> None:
    s = await sim(long_context_args("--sim-fault", "stall-at-kv:threshold=0.975"))
    status, _ = await s.complete(prompt="short first", max_tokens=8, ignore_eos=True)
    assert status == 200
    long_request = asyncio.create_task(
        s.complete(prompt="needle", sim_prompt_tokens=512 * 1024, max_tokens=64, ignore_eos=True)
    )

    async def kv_past_threshold() -> bool:
        return (await s.totals())["vllm:kv_cache_usage_perc"] >= 0.975

    await wait_for(kv_past_threshold)
    await until(lambda: s.parked)  # the step that crossed 97.5% was its last: the loop waits to be woken
    steps, before = s.steps, await s.totals()
    canary = asyncio.create_task(s.complete(prompt="ping", max_tokens=4))
    await until(lambda: s.queued == 1 and s.parked)  # the canary woke it; it looked, and stepped no more
    after = await s.totals()
    assert s.steps == steps
    for name in PROGRESS:
        assert after[name] == before[name], name
    assert (after["vllm:num_requests_running"], after["vllm:num_requests_waiting"]) == (1, 1)
    assert after["vllm:kv_cache_usage_perc"] == before["vllm:kv_cache_usage_perc"]
    assert not long_request.done()
    assert not canary.done()
    await assert_http_alive(s)
    state = await s.state()
    assert state["engines"][0]["stalled"] is True  # type: ignore[index]
    # Clearing the fault lets both finish: they were stalled, not lost.
    async with s.session.delete(s.base + "/sim/faults") as resp:
        assert resp.status == 200
    status, body = await asyncio.wait_for(long_request, timeout=10)
    assert status == 200
    assert body["usage"]["completion_tokens"] == 64  # type: ignore[index]
    assert (await asyncio.wait_for(canary, timeout=10))[0] == 200


async def test_without_the_fault_a_512k_request_completes_past_97_5_percent(sim: SimFactory) -> None:
    # Scale 200: the last 10% of the prefill (~25 engine s) spans ~120 ms of wall time, so the gauge is
    # sampled there many times.
    s = await sim(long_context_args(spec=False, scale=200.0))
    peak = 0.0
    task = asyncio.create_task(s.complete(prompt="n", sim_prompt_tokens=512 * 1024, max_tokens=4, ignore_eos=True))
    while not task.done():
        peak = max(peak, (await s.totals())["vllm:kv_cache_usage_perc"])
        await asyncio.sleep(0.005)
    status, _ = task.result()
    assert status == 200
    assert 0.9 < peak < 1.0


async def test_hang_stops_all_generation_while_http_answers(sim: SimFactory) -> None:
    s = await sim(base_args())
    status, body = await s.fault({"fault": "hang"})
    assert status == 200
    assert body["faults"][0]["fault"] == "hang"  # type: ignore[index]
    before = await s.totals()
    assert await canary_times_out(s)
    await assert_http_alive(s)
    after = await s.totals()
    for name in PROGRESS:
        assert after[name] == before[name], name
    async with s.session.get(s.base + "/sim/faults") as resp:
        assert [f["fault"] for f in (await resp.json())["faults"]] == ["hang"]
    async with s.session.delete(s.base + "/sim/faults", params={"fault": "hang"}) as resp:
        assert (await resp.json())["cleared"] == ["hang"]
    status, _ = await s.complete(max_tokens=4)
    assert status == 200


ENGINE_CORE_SERIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:request_success_total",
    *PROGRESS,
)


async def test_a_hung_engine_core_freezes_its_series_while_the_api_server_accepts(sim: SimFactory) -> None:
    # A SIGSTOPped EngineCore ships no SchedulerStats and no outputs, and /health only asks whether the engine
    # is dead (vllm/v1/engine/async_llm.py:900-903), so requests arriving now are accepted but never seen by
    # the gauges: running/waiting stay at what the last step said.
    s = await sim(base_args(scale=1.0))
    busy = asyncio.create_task(s.complete(prompt="busy", max_tokens=2000, ignore_eos=True))
    await wait_for(lambda: _running_is(s, 1))
    await s.fault({"fault": "hang"})
    steps = s.steps
    await until(lambda: s.parked)  # the step in flight when it stopped does not end
    before = await s.totals()
    arrivals = [asyncio.create_task(s.complete(max_tokens=4)) for _ in range(3)]
    await until(lambda: s.queued == 3 and s.parked)  # they reached the engine core, which stayed stopped
    await assert_http_alive(s)
    after = await s.totals()
    assert s.steps == steps
    for name in ENGINE_CORE_SERIES:
        assert after[name] == before[name], name
    assert (after["vllm:num_requests_running"], after["vllm:num_requests_waiting"]) == (1, 0)
    assert not any(task.done() for task in [busy, *arrivals])
    async with s.session.delete(s.base + "/sim/faults") as resp:
        assert resp.status == 200
    for task in arrivals:
        assert (await task)[0] == 200
    busy.cancel()
    await asyncio.gather(busy, return_exceptions=True)


async def _running_is(s: Sim, value: float) -> bool:
    return (await s.totals())["vllm:num_requests_running"] == value


async def test_an_idle_hung_engine_shows_no_waiting_canary(sim: SimFactory) -> None:
    s = await sim(base_args())
    await s.fault({"fault": "hang"})
    canary = asyncio.create_task(s.complete(max_tokens=4))
    await until(lambda: s.queued == 1 and s.parked)  # it reached the stopped engine core
    totals = await s.totals()
    assert not canary.done()
    assert s.steps == 0
    # what the last scheduler stats said at idle; vLLM has no way to see the stuck canary as waiting
    assert (totals["vllm:num_requests_running"], totals["vllm:num_requests_waiting"]) == (0, 0)
    canary.cancel()
    await asyncio.gather(canary, return_exceptions=True)
    await until(lambda: s.queued == 0 and s.parked)  # the server saw the client go and aborted the request
    assert (await s.totals())["vllm:request_success_total"] == 0  # the abandoned canary is not counted


async def _tpot(s: Sim, prompt: str) -> float:
    before = await s.totals()
    await s.complete(prompt=prompt, max_tokens=64, ignore_eos=True)
    after = await s.totals()
    key = "vllm:request_time_per_output_token_seconds_sum"
    return after[key] - before[key]


async def test_drift_raises_step_time_by_the_fraction_over_the_period(sim: SimFactory) -> None:
    s = await sim(base_args(spec=False, scale=2000.0))
    baseline = await _tpot(s, "a")
    status, _ = await s.fault({"fault": "drift", "fraction": 0.18, "period_s": 600})
    assert status == 200
    early = await _tpot(s, "b")
    await asyncio.sleep(0.35)  # 700 engine seconds: past the period
    late = await _tpot(s, "c")
    # a C1 step without speculative decoding: 0.717 of a DSpark7 step (14.2 ms x 4.158, docs/FACTS.md), one token
    assert baseline == pytest.approx(cal.decode_step_s(batch=1, tp=8, num_speculative_tokens=0), rel=0.01)
    assert early < baseline * 1.09  # grows over the period: well under the full 18% just after setting it
    assert late == pytest.approx(baseline * 1.18, rel=0.01)  # docs/FACTS.md: ~18% slower after long uptime


async def test_drop_args_serves_models_but_has_no_spec_decode_series(sim: SimFactory) -> None:
    s = await sim(base_args("--sim-drop-args=--speculative-config"))
    async with s.session.get(s.base + "/v1/models") as resp:
        assert resp.status == 200
    await s.complete(max_tokens=8, ignore_eos=True)
    text = await s.metrics_text()
    assert "vllm:generation_tokens_total" in text
    assert "spec_decode" not in text
    state = await s.state()
    assert state["config"]["speculative_config"] is None  # type: ignore[index]
    assert "--speculative-config" in state["config"]["dropped"]  # type: ignore[index]
    status, body = await s.fault({"fault": "drop-args", "flags": ["--speculative-config"]})
    assert status == 409
    assert "--sim-drop-args" in body["error"]  # type: ignore[operator]


@pytest.mark.parametrize(
    "body",
    [{"fault": "melt"}, {"fault": "stall-at-kv", "threshold": 2}, {"fault": "crash", "exit_code": 0}, ["hang"]],
)
async def test_bad_fault_requests_are_refused(sim: SimFactory, body: object) -> None:
    s = await sim(base_args())
    async with s.session.post(s.base + "/sim/faults", json=body) as resp:
        assert resp.status == 400
    async with s.session.get(s.base + "/sim/faults") as resp:
        assert (await resp.json())["faults"] == []


async def test_a_full_pool_preempts_and_every_request_still_completes(sim: SimFactory) -> None:
    # 0.70 of HBM leaves ~1.4 GiB of KV: about 53K context tokens at the hybrid-KV cost (a short
    # max-model-len and batch budget keep the start-up requirement under it).
    argv = base_args("--gpu-memory-utilization", "0.70", spec=False, scale=5000.0)
    argv[argv.index("--max-model-len") + 1] = "16384"
    argv[argv.index("--max-num-batched-tokens") + 1] = "2048"
    s = await sim(argv)
    results = await asyncio.gather(
        *(s.complete(prompt=f"p{i}", sim_prompt_tokens=12_000, max_tokens=3000, ignore_eos=True) for i in range(6))
    )
    assert all(status == 200 for status, _ in results)
    totals = await s.totals()
    assert totals["vllm:num_preemptions_total"] > 0
    assert totals["vllm:kv_cache_usage_perc"] == 0
