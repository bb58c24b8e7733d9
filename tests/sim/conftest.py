"""Fixtures for the engine simulator tests: in-process servers on random 127.x addresses, and subprocesses.

In-process servers (`sim`) start in milliseconds and run in the test's own event loop; subprocesses
(`spawn`) are used where the process itself is the subject: exit codes, start-up, CPU use, many instances.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import aiohttp
import pytest

from aissim.args import parse_serve_args
from aissim.runtime import Running, launch
from harness.loadgen import scrape_totals

SPEC7 = '{"method":"dspark","num_speculative_tokens":7,"enforce_eager":true}'
MODEL = "deepseek-v4-flash"


def loopback() -> str:
    """A random 127.x address, so parallel test runs (and other suites) never share one."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(1, 254)}"


def base_args(*extra: str, scale: float = 1000.0, spec: bool = True) -> list[str]:
    args = [
        "/data/models/DeepSeek-V4-Flash-0731-w8a8",
        "--host",
        loopback(),
        "--port",
        "0",
        "--served-model-name",
        MODEL,
        "--max-model-len",
        "327680",
        "--max-num-batched-tokens",
        "8192",
        "--max-num-seqs",
        "32",
        "--tensor-parallel-size",
        "8",
        "--block-size",
        "128",
        "--sim-time-scale",
        str(scale),
    ]
    if spec:
        args += ["--speculative-config", SPEC7]
    return [*args, *extra]


@dataclass(repr=False)
class Sim:
    """A running in-process simulator and an HTTP session to it."""

    running: Running
    session: aiohttp.ClientSession

    @property
    def base(self) -> str:
        return f"http://{self.running.host}:{self.running.port}"

    async def get(self, path: str) -> aiohttp.ClientResponse:
        return await self.session.get(self.base + path)

    async def metrics_text(self) -> str:
        async with self.session.get(self.base + "/metrics") as resp:
            assert resp.status == 200
            return await resp.text()

    async def totals(self) -> dict[str, float]:
        return scrape_totals(await self.metrics_text())

    async def state(self) -> dict[str, object]:
        async with self.session.get(self.base + "/sim/state") as resp:
            data: dict[str, object] = await resp.json()
            return data

    async def complete(self, **body: object) -> tuple[int, dict[str, object]]:
        payload = {"model": MODEL, "prompt": "hello", **body}
        async with self.session.post(self.base + "/v1/completions", json=payload) as resp:
            return resp.status, await resp.json()

    async def fault(self, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        async with self.session.post(self.base + "/sim/faults", json=body) as resp:
            return resp.status, await resp.json()

    @property
    def steps(self) -> int:
        """Scheduler steps of every engine so far."""
        return sum(core.sched.steps for core in self.running.engine.cores)

    @property
    def queued(self) -> int:
        """Requests the schedulers hold but do not run."""
        return sum(len(core.sched.waiting) for core in self.running.engine.cores)

    @property
    def parked(self) -> bool:
        """Every engine's step loop waits for a wake with none pending: nothing more happens until a request,
        an abort, a fault change or a peer wakes it (aissim/engine.py `EngineCore.parked`)."""
        return all(core.parked for core in self.running.engine.cores)


async def until(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    """Wait for an in-process condition. With `Sim.parked` it is how a test says "nothing happened": not
    "nothing in N seconds" but "the engine looked at what woke it and went back to waiting"."""
    async with asyncio.timeout(within):
        while True:  # in-process state with no event of its own to await: looked at every 5 ms
            if predicate():
                return
            await asyncio.sleep(0.005)


SimFactory = Callable[..., Awaitable[Sim]]


@pytest.fixture
async def sim() -> AsyncIterator[SimFactory]:
    """Start simulators from `vllm serve` argv; all are closed at the end of the test."""
    started: list[Sim] = []

    async def factory(argv: list[str]) -> Sim:
        running = await launch(parse_serve_args(argv, env={}), exit_fn=_no_exit)
        assert not isinstance(running, str), running
        s = Sim(running, aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)))
        started.append(s)
        return s

    yield factory
    for s in started:
        await s.session.close()
        await s.running.close()


def _no_exit(code: int) -> None:
    raise AssertionError(f"in-process simulator tried to exit with {code}")


@dataclass
class Proc:
    """A simulator subprocess and where it listens."""

    popen: subprocess.Popen[str]
    host: str
    port: int
    bound_line: str = ""
    """The log line that said where it listens (and that the model starts loading)."""

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"


_LISTEN = re.compile(r"bound (\S+):(\d+);")


def popen_sim(argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start `python -m aissim serve ...` without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "aissim", "serve", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def await_bind(popen: subprocess.Popen[str]) -> Proc:
    """Read the child's log until it says where it bound its socket."""
    assert popen.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = popen.stderr.readline()
        if not line:
            break
        match = _LISTEN.search(line)
        if match:
            return Proc(popen, match.group(1), int(match.group(2)), bound_line=line)
    popen.kill()
    raise AssertionError(f"simulator did not bind; exit={popen.poll()}")


async def wait_ready(base: str, *, within: float = 30.0) -> None:
    """Poll /health until it answers 200."""
    async with asyncio.timeout(within), aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1)) as session:
        while True:
            try:
                async with session.get(base + "/health") as resp:
                    if resp.status == 200:
                        return
            except (TimeoutError, aiohttp.ClientError):
                pass
            await asyncio.sleep(0.05)


@pytest.fixture
def spawn() -> Iterator[Callable[..., list[Proc]]]:
    """Start simulator subprocesses (all launched before any is awaited, so they boot in parallel);
    each is terminated by its own PID at the end of the test."""
    procs: list[Proc] = []

    def factory(*argvs: list[str], env: dict[str, str] | None = None) -> list[Proc]:
        popens = [popen_sim(argv, env=env) for argv in argvs]
        started = [await_bind(p) for p in popens]
        procs.extend(started)
        return started

    yield factory
    for proc in procs:
        if proc.popen.poll() is None:
            proc.popen.terminate()
    for proc in procs:
        try:
            proc.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()
        if proc.popen.stderr:
            proc.popen.stderr.close()
