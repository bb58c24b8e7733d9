"""A simulated two-node group: the leader reports every DP rank and stops them all while a worker is silent.

In-process leader and worker on one random 127.x address (different ports), with the flags
render/group.py gives them (vllm-ascend DeepSeek-R1 tutorial section 5.2 form).
"""

from __future__ import annotations

import asyncio
import random

from tests.sim.conftest import SimFactory, base_args, loopback


def _group_args(host: str, rpc: int, *, worker: bool) -> list[str]:
    args = base_args(scale=1000.0, spec=False)
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
    await asyncio.sleep(1.0)
    assert not early.done()  # before the worker joined no rank makes progress
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
    await asyncio.sleep(2.0)  # past the leader's peer timeout
    pending = asyncio.ensure_future(leader.complete(max_tokens=4))
    await asyncio.sleep(2.0)
    assert not pending.done()  # requests sit with no forward progress, /health still answers
    async with leader.session.get(leader.base + "/health") as resp:
        assert resp.status == 200
    async with worker.session.delete(worker.base + "/sim/faults") as resp:
        assert resp.status == 200
    code, body = await asyncio.wait_for(pending, timeout=30)
    assert code == 200  # the peer is back: progress resumes
