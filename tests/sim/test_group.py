"""A simulated two-node group: the leader reports every DP rank, the worker's too, and a silent worker stops
its ranks (every rank of an MoE model, whose ranks run in lockstep; only its own of a dense model).

In-process leader and worker on one random 127.x address (different ports), with the flags
render/group.py gives them (vllm-ascend DeepSeek-R1 tutorial section 5.2 form). The operator's stall
detector, fed the leader's /metrics, names the stalled ranks.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from aissim.group import LeaderLink
from ascend_operator.api.health import StallSpec
from ascend_operator.health.samples import EngineSample, parse_metrics
from ascend_operator.health.stall import detect_stall
from tests.sim.conftest import Sim, SimFactory, base_args, loopback, until


def _group_args(host: str, rpc: int, *, worker: bool, scale: float = 1000.0) -> list[str]:
    args = base_args(scale=scale, spec=False)
    args[args.index("--host") + 1] = host
    args[args.index("--tensor-parallel-size") + 1] = "4"
    args += ["--data-parallel-size", "4", "--data-parallel-size-local", "2"]
    args += ["--data-parallel-address", host, "--data-parallel-rpc-port", str(rpc)]
    if worker:
        args += ["--headless", "--data-parallel-start-rank", "2"]
    return args


async def test_leader_serves_every_rank_and_stops_when_the_worker_hangs(sim: SimFactory) -> None:
    host, rpc = loopback(), random.randint(20000, 40000)
    leader = await sim(_group_args(host, rpc, worker=False))
    early = asyncio.ensure_future(leader.complete(max_tokens=2))
    await until(lambda: leader.queued == 1 and leader.parked)
    assert (leader.steps, early.done()) == (0, False)  # before the worker joined no rank makes progress
    worker = await sim(_group_args(host, rpc, worker=True))
    async with worker.session.get(worker.base + "/v1/models") as resp:
        assert resp.status == 404  # a headless worker serves no OpenAI API
    code, _ = await asyncio.wait_for(early, timeout=30)
    assert code == 200  # the worker joined: the waiting request completes
    code, body = await asyncio.wait_for(leader.complete(max_tokens=4), timeout=30)
    assert code == 200
    assert body["usage"]["completion_tokens"] == 4  # type: ignore[index]
    text = await leader.metrics_text()
    engines = {line.split('engine="')[1].split('"')[0] for line in text.splitlines() if 'engine="' in line}
    assert engines == {"0", "1", "2", "3"}

    code, _ = await worker.fault({"fault": "hang"})
    assert code == 200
    (link,) = leader.running.links
    assert isinstance(link, LeaderLink)
    await until(lambda: link.lost() == [2, 3])  # its heartbeats stopped for longer than the peer timeout
    steps = leader.steps
    pending = asyncio.ensure_future(leader.complete(max_tokens=4))
    await until(lambda: leader.queued == 1 and leader.parked)
    assert (leader.steps, pending.done()) == (steps, False)  # no forward progress, /health still answers
    async with leader.session.get(leader.base + "/health") as resp:
        assert resp.status == 200
    async with worker.session.delete(worker.base + "/sim/faults") as resp:
        assert resp.status == 200
    code, body = await asyncio.wait_for(pending, timeout=30)
    assert code == 200  # the peer is back: progress resumes


async def _scrapes(leader: Sim, *, seconds: float, every: float = 0.25) -> list[EngineSample]:
    loop = asyncio.get_running_loop()
    out: list[EngineSample] = []
    end = loop.time() + seconds
    while loop.time() < end:
        out.append(parse_metrics(await leader.metrics_text(), t=loop.time()))
        await asyncio.sleep(every)
    return out


@pytest.mark.parametrize(
    ("dense", "stalled"),
    [(True, ("2", "3")), (False, ("0", "1", "2", "3"))],
    ids=["dense-model-only-the-worker's-ranks", "moe-model-every-rank"],
)
async def test_a_hung_worker_stops_its_ranks_and_the_verdict_names_them(
    sim: SimFactory, dense: bool, stalled: tuple[str, ...]
) -> None:
    host, rpc = loopback(), random.randint(20000, 40000)
    extra = ["--sim-dense"] if dense else []
    leader = await sim([*_group_args(host, rpc, worker=False, scale=100.0), *extra])
    worker = await sim([*_group_args(host, rpc, worker=True, scale=100.0), *extra])
    load = [
        asyncio.ensure_future(leader.complete(max_tokens=60000, ignore_eos=True, sim_prompt_tokens=64))
        for _ in range(8)
    ]
    try:

        async def every_rank_busy() -> bool:
            ranks = parse_metrics(await leader.metrics_text(), t=0).ranks
            return len(ranks) == 4 and all(r.running > 0 for r in ranks.values())

        for _ in range(100):
            if await every_rank_busy():
                break
            await asyncio.sleep(0.1)
        assert await every_rank_busy()  # the leader reports the worker's ranks 2 and 3 too
        code, _ = await worker.fault({"fault": "hang"})
        assert code == 200
        await asyncio.sleep(2.0)  # past the leader's peer timeout
        samples = await _scrapes(leader, seconds=3.0)
        finding = detect_stall(samples, cfg=StallSpec(window_seconds=2.0))
        assert (finding.stalled, finding.ranks) == (True, stalled), finding
        assert f"of 4: {2 * len(stalled)} request(s) running" in finding.message
        summed = [replace(s, ranks={}) for s in samples]
        # summed over ranks, the dense group's stall hides behind the leader's progressing ranks
        assert detect_stall(summed, cfg=StallSpec(window_seconds=2.0)).stalled is not dense
    finally:
        for request in load:
            request.cancel()
        await asyncio.gather(*load, return_exceptions=True)
