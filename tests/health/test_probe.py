"""The kubelet canary probe against a real simulator: ready only when tokens come back or work advances.

Each probe runs the rendered source exactly as the pod's readinessProbe does (`python3 -c <source> ...`),
with `-S` so this package is not importable: the source must carry the progress definition itself.
"""

import ast
import asyncio
import sys
from pathlib import Path

from ascend_operator import canary
from ascend_operator.canary import probe, progress
from ascend_operator.render.probes import probe_source
from tests.sim.conftest import MODEL, SimFactory, base_args, sim, until  # noqa: F401  (a fixture of tests/sim)


def test_probe_imports_only_the_standard_library() -> None:
    for module in (canary, probe, progress):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {
            n.module.split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and not n.module.startswith("ascend_operator.canary.")
        }
        assert names <= sys.stdlib_module_names, module.__name__


async def _probe(host: str, port: int, timeout: float = 5.0) -> int:
    argv = [str(port), MODEL, "4", str(timeout), "Reply with OK.", host]
    proc = await asyncio.create_subprocess_exec(sys.executable, "-S", "-c", probe_source(), *argv)
    return await proc.wait()


async def test_healthy_engine_is_ready(sim: SimFactory) -> None:
    s = await sim(base_args())
    assert await _probe(s.running.host, s.running.port) == 0


async def test_hung_engine_is_not_ready_although_health_is_200(sim: SimFactory) -> None:
    s = await sim(base_args())
    assert (await s.fault({"fault": "hang"}))[0] == 200
    async with s.session.get(s.base + "/health") as resp:
        assert resp.status == 200
    assert await _probe(s.running.host, s.running.port, timeout=1.0) == 1


async def test_unreachable_engine_is_not_ready() -> None:
    assert await _probe("127.0.0.1", 9, timeout=1.0) == 1


async def test_busy_engine_with_a_queued_canary_stays_ready(sim: SimFactory) -> None:
    # Real time (scale 1): 40 long requests fill the 32 slots, so the canary waits for a slot, as at the
    # seed's C64 (TTFT 28.56 s); the engine keeps generating, so the probe passes on progress.
    s = await sim(base_args(scale=1.0))
    load = [asyncio.create_task(s.complete(max_tokens=400, ignore_eos=True)) for _ in range(40)]
    try:
        await until(lambda: s.queued == 8)  # every slot taken, eight behind them: the canary will queue
        steps = s.steps
        assert await _probe(s.running.host, s.running.port, timeout=0.5) == 0
        assert s.queued > 0  # still full when the probe passed: it passed on progress, not on a free slot
        assert s.steps > steps
        assert not any(task.done() for task in load)
    finally:
        for task in load:
            task.cancel()
        await asyncio.gather(*load, return_exceptions=True)


async def test_canary_behind_a_lone_long_prefill_stays_ready(sim: SimFactory) -> None:
    # Real time (scale 1): a 256K prompt prefills for ~55 s in 8192-token chunks. On vLLM's semantics no token
    # counter and no iteration count moves until it completes; only the KV gauge does, and that is progress.
    s = await sim(base_args(scale=1.0))
    long = asyncio.create_task(s.complete(sim_prompt_tokens=262_144, max_tokens=4, ignore_eos=True))
    (core,) = s.running.engine.cores
    try:
        await until(lambda: core.pool.usage > 0)  # the first chunk is in: the prefill runs
        assert await _probe(s.running.host, s.running.port, timeout=2.0) == 0
        assert not long.done()  # still prefilling: the probe passed during the prefill, not after it
        assert (await s.totals())["vllm:generation_tokens_total"] == 0
    finally:
        long.cancel()
        await asyncio.gather(long, return_exceptions=True)


async def test_probe_sends_the_key_from_its_environment_never_from_its_args(sim: SimFactory) -> None:
    s = await sim(base_args("--api-key", "s3cret", scale=1.0))  # real time: an idle engine makes no progress
    argv = [str(s.running.port), MODEL, "4", "2.0", "Reply with OK.", s.running.host]
    assert await asyncio.to_thread(probe.main, argv, {"VLLM_API_KEY": "s3cret"}) == 0
    assert await asyncio.to_thread(probe.main, argv, {}) == 1
    assert await asyncio.to_thread(probe.main, argv, {"VLLM_API_KEY": "wrong"}) == 1
