"""Per-request histograms are stamped when and as vLLM 0.25.1 stamps them.

Reference: the engine core stamps a request QUEUED when its busy loop reads it and SCHEDULED at the next
schedule() (vllm/v1/engine/core.py:1259-1298, vllm/v1/core/sched/scheduler.py:430, 971-972, 2034), queue
time is their difference (vllm/v1/metrics/stats.py:439-440); n and the generated-token maximum are observed
when the request finishes (vllm/v1/engine/output_processor.py:816-818, parallel_sampling.py:134-150).
"""

from __future__ import annotations

import asyncio
import json

from tests.sim.conftest import MODEL, Sim, SimFactory, base_args
from tests.sim.test_faults import wait_for

QUEUE_SUM = "vllm:request_queue_time_seconds_sum"
TTFT_SUM = "vllm:time_to_first_token_seconds_sum"


async def test_n_and_generated_tokens_are_observed_at_the_finish(sim: SimFactory) -> None:
    s = await sim(base_args(spec=False, scale=10.0))
    before = await s.totals()
    body = {"model": MODEL, "prompt": "count me at the end", "max_tokens": 100, "ignore_eos": True, "stream": True}
    async with s.session.post(s.base + "/v1/completions", json=body) as resp:
        first = await resp.content.readline()
        assert first.startswith(b"data: {")
        during = await s.totals()
        rest = [line async for line in resp.content]
    assert b"data: [DONE]\n" in rest
    for name in ("vllm:request_params_n_count", "vllm:request_max_num_generation_tokens_count"):
        assert during[name] == before[name], f"{name} moved while the request ran"
    # the generated tokens of a request that stopped on its own, not its max_tokens
    status, done = await s.complete(prompt="a natural stop", max_tokens=4096)
    assert status == 200
    assert done["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
    generated = done["usage"]["completion_tokens"]  # type: ignore[index]
    after = await s.totals()
    assert after["vllm:request_params_n_count"] - before["vllm:request_params_n_count"] == 2
    assert after["vllm:request_params_n_sum"] - before["vllm:request_params_n_sum"] == 2
    tokens = after["vllm:request_max_num_generation_tokens_sum"] - before["vllm:request_max_num_generation_tokens_sum"]
    assert tokens == 100 + generated


async def test_a_request_never_queued_still_has_a_queue_time(sim: SimFactory) -> None:
    s = await sim(base_args())
    before = await s.totals()
    status, _ = await s.complete(max_tokens=4)
    assert status == 200
    queued = (await s.totals())[QUEUE_SUM] - before[QUEUE_SUM]
    assert 0 < queued < 1e-3  # the engine core's turn from reading the request to scheduling it


async def _running_is(s: Sim, value: float) -> bool:
    return (await s.totals())["vllm:num_requests_running"] == value


async def test_a_request_sent_into_a_hang_is_queued_only_from_the_resume(sim: SimFactory) -> None:
    """It sat unread in a stopped engine core's socket: no queue time for that, but the client waited
    (TTFT counts from the API server's arrival)."""
    s = await sim(base_args(scale=1.0))
    busy = asyncio.create_task(s.complete(prompt="busy", max_tokens=2000, ignore_eos=True))
    await wait_for(lambda: _running_is(s, 1))
    await s.fault({"fault": "hang"})
    before = await s.totals()
    late = asyncio.create_task(s.complete(prompt="late", max_tokens=4))
    await asyncio.sleep(0.4)
    async with s.session.delete(s.base + "/sim/faults") as resp:
        assert resp.status == 200
    assert (await late)[0] == 200
    busy.cancel()  # aborted: no finished-request stats
    await asyncio.gather(busy, return_exceptions=True)
    after = await s.totals()
    assert after["vllm:request_success_total"] - before["vllm:request_success_total"] == 1
    assert 0 < after[QUEUE_SUM] - before[QUEUE_SUM] < 0.05
    assert after[TTFT_SUM] - before[TTFT_SUM] > 0.3


async def test_an_idle_engine_core_resumed_from_a_hang_steps_from_the_resume(sim: SimFactory) -> None:
    s = await sim(base_args(scale=1.0))
    await s.fault({"fault": "hang"})
    before = await s.totals()
    canary = asyncio.create_task(s.complete(prompt="canary", max_tokens=2))
    await asyncio.sleep(0.4)
    async with s.session.delete(s.base + "/sim/faults") as resp:
        assert resp.status == 200
    status, body = await canary
    assert status == 200, json.dumps(body)
    after = await s.totals()
    assert 0 < after[QUEUE_SUM] - before[QUEUE_SUM] < 0.05
    # its first step runs after the resume, not back at its arrival during the hang
    assert after[TTFT_SUM] - before[TTFT_SUM] > 0.3
