"""SIGTERM with requests in flight, as vLLM 0.25.1 takes it (tests/fidelity runs the real engine).
`--shutdown-timeout 0` (its default, mode "abort") stops the engine core at once; N (mode "drain") lets it
run up to N seconds (vllm/entrypoints/launcher.py:109-123). A request unfinished when the engine core goes is
lost: on the real engine, racing with the kill, its stream gets finish_reason "abort", an error event, or
nothing more at all, the server then living until the client gives up. The simulator does the last (the
hardest on a client). It used to finish every in-flight request within aiohttp's 60 s whatever the flag said:
kinder than vLLM to every request a pod deletion without a drain hits.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import pytest

from tests.sim.conftest import MODEL, Proc, base_args, popen_sim, wait_ready

Spawn = Callable[..., list[Proc]]

pytestmark = pytest.mark.timeout(120)

#: How long a client waits for the next chunk before it gives up on a silent stream.
PATIENCE_SECONDS = 3.0


@dataclass
class Outcome:
    before: int
    """Chunks read before the signal."""
    after: int
    """Chunks read after it."""
    done: bool
    """The stream ended with `[DONE]`."""
    finish_reason: object
    alive_when_client_left: bool
    """The server process was still running when the client stopped reading (its stream went silent)."""


async def stream_and_signal(proc: Proc, *, max_tokens: int, signal_after: int = 3) -> Outcome:
    """Stream a completion and SIGTERM the server once `signal_after` chunks came; read on until `[DONE]` or a
    silence of PATIENCE_SECONDS, then leave and wait for the process to exit."""
    body = {"model": MODEL, "prompt": "drain me", "max_tokens": max_tokens, "stream": True, "ignore_eos": True}
    counts = [0, 0]
    done = False
    finish: object = None
    timeout = aiohttp.ClientTimeout(total=90, sock_read=PATIENCE_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            async with session.post(proc.base + "/v1/completions", json=body) as resp:
                assert resp.status == 200
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        done = True
                        break
                    chunk = json.loads(line[6:])
                    finish = chunk["choices"][0].get("finish_reason") or finish
                    signalled = counts[0] >= signal_after
                    counts[signalled] += 1
                    if not signalled and counts[0] == signal_after:
                        proc.popen.send_signal(signal.SIGTERM)
        except TimeoutError:
            pass  # the stream went silent: this client gives up
        alive = proc.popen.poll() is None
    await asyncio.to_thread(proc.popen.wait, 60)
    return Outcome(counts[0], counts[1], done, finish, alive)


async def test_the_default_stops_in_flight_requests_dead_and_exits_once_the_client_leaves(spawn: Spawn) -> None:
    (proc,) = spawn(base_args(scale=1.0, spec=False))
    await wait_ready(proc.base)
    started = time.monotonic()
    out = await stream_and_signal(proc, max_tokens=5000)
    assert not out.done, "the request completed although vLLM aborts it without --shutdown-timeout"
    assert out.finish_reason is None, "an aborted request got a finish reason: vLLM sends none"
    assert out.after <= 2, f"{out.after} chunks after SIGTERM: the engine kept generating"
    assert out.alive_when_client_left, "the server exited under an open stream; vLLM's waits for its clients"
    assert proc.popen.returncode == 0
    assert time.monotonic() - started < 60, "5000 tokens at Ascend speed: the request was not stopped"


async def test_a_shutdown_timeout_drains_the_in_flight_request_then_exits(spawn: Spawn) -> None:
    (proc,) = spawn(base_args("--shutdown-timeout", "60", scale=1.0, spec=False))
    await wait_ready(proc.base)
    out = await stream_and_signal(proc, max_tokens=64)
    assert out.done, "the in-flight request was cut although the engine drains for 60 s"
    assert out.finish_reason == "length"
    assert out.before + out.after >= 32
    assert proc.popen.returncode == 0


async def test_a_request_longer_than_the_drain_stops_dead_when_it_ends(spawn: Spawn) -> None:
    # 2 engine seconds of drain at 1x, then the engine core goes; the 5000-token request is far from done
    (proc,) = spawn(base_args("--shutdown-timeout", "2", scale=1.0, spec=False))
    await wait_ready(proc.base)
    out = await stream_and_signal(proc, max_tokens=5000)
    assert out.after > 2, "nothing was generated during the drain"
    assert not out.done
    assert out.finish_reason is None
    assert out.alive_when_client_left


async def test_a_shutdown_timeout_that_is_no_integer_is_refused_at_start() -> None:
    popen = popen_sim(base_args("--shutdown-timeout", "soon", scale=1000.0))
    try:
        code = await asyncio.to_thread(popen.wait, 30)
    except subprocess.TimeoutExpired:
        code = None  # it started serving: stopped below by its PID, not left behind
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait()
    assert code == 2
    assert popen.stderr is not None
    assert "argument --shutdown-timeout: invalid int value: 'soon'" in popen.stderr.read()
