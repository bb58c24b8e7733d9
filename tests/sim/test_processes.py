"""The simulator as a process: start-up, crash exit codes, slow start, many instances, idle CPU."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import struct
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest

from tests.sim.conftest import MODEL, Proc, base_args, loopback, wait_ready
from tests.sim.test_args import PRODUCTION

Spawn = Callable[..., list[Proc]]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (what `ps` and the kubelet read)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def get_json(base: str, path: str) -> dict[str, object]:
    async with aiohttp.ClientSession() as session, session.get(base + path) as resp:
        assert resp.status == 200
        data: dict[str, object] = await resp.json()
        return data


async def parked(proc: Proc, *, within: float = 10.0) -> None:
    """Wait until every engine of a simulator process reports its step loop parked (/sim/state)."""
    async with asyncio.timeout(within):
        while True:
            engines = (await get_json(proc.base, "/sim/state"))["engines"]
            assert isinstance(engines, list)
            if all(e["parked"] for e in engines):
                return
            await asyncio.sleep(0.05)


async def test_the_production_command_starts_unchanged(spawn: Spawn) -> None:
    env = {"AIS_SIM_BIND_HOST": loopback(), "AIS_SIM_BIND_PORT": "0", "AIS_SIM_TIME_SCALE": "100"}
    (proc,) = spawn(PRODUCTION, env=env)
    await wait_ready(proc.base)
    models = await get_json(proc.base, "/v1/models")
    assert models["data"][0]["id"] == "deepseek-v4-flash"  # type: ignore[index]
    assert models["data"][0]["max_model_len"] == 327680  # type: ignore[index]
    async with aiohttp.ClientSession() as session:
        async with session.get(proc.base + "/metrics") as resp:
            text = await resp.text()
        body = {"model": MODEL, "prompt": "canary", "max_tokens": 4}
        async with session.post(proc.base + "/v1/completions", json=body) as resp:
            assert resp.status == 200
    assert 'block_size="8"' in text  # the smallest DeepSeek-V4 KV cache group at --block-size 128
    assert 'gpu_memory_utilization="0.9"' in text
    assert text.count("vllm:spec_decode_num_accepted_tokens_per_pos_total{") == 7
    state = await get_json(proc.base, "/sim/state")
    assert state["config"]["compilation_config"] == {"cudagraph_mode": "FULL_DECODE_ONLY"}  # type: ignore[index]


@pytest.mark.parametrize("how", ["api", "flag"])
async def test_crash_exits_non_zero(spawn: Spawn, how: str) -> None:
    extra = ["--sim-fault", "crash:exit_code=3,after_s=20"] if how == "flag" else []
    (proc,) = spawn(base_args(*extra, scale=100.0))
    if how == "api":
        await wait_ready(proc.base)
        crash = {"fault": "crash", "exit_code": 3}
        async with aiohttp.ClientSession() as session, session.post(proc.base + "/sim/faults", json=crash) as resp:
            assert resp.status == 200
    assert await asyncio.to_thread(proc.popen.wait, 10) == 3


def accept_queue(host: str, port: int) -> int:
    """Connections the kernel completed on a listening socket that its process has not accepted yet: the
    rx_queue /proc/net/tcp shows for a socket in LISTEN (0A)."""
    local = f"{struct.unpack('<I', socket.inet_aton(host))[0]:08X}:{port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == local and fields[3] == "0A":
            return int(fields[4].split(":")[1], 16)
    raise AssertionError(f"nothing listens on {host}:{port}")


def logged_at(line: str) -> datetime:
    """The time stamp `aissim serve` puts on a log line (%(asctime)s, milliseconds)."""
    match = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", line)
    assert match, line
    return datetime.strptime(match.group(0), "%Y-%m-%d %H:%M:%S,%f")


def read_until(popen: subprocess.Popen[str], text: str) -> str:
    """The child's next log line that contains `text`."""
    assert popen.stderr is not None
    while line := popen.stderr.readline():
        if text in line:
            return line
    raise AssertionError(f"the simulator exited ({popen.poll()}) without logging {text!r}")


async def test_slow_start_binds_the_port_but_answers_nothing_until_loaded(spawn: Spawn) -> None:
    # 120 engine seconds of loading at scale 100 = 1.2 s wall.
    (proc,) = spawn(base_args("--sim-load-seconds", "120", scale=100.0))
    with socket.create_connection((proc.host, proc.port), timeout=1) as sock:  # the port is bound ...
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: {proc.host}\r\n\r\n".encode())
        # ... but the connection waits in the kernel's queue: nothing accepts it while the weights load, as with vLLM
        assert accept_queue(proc.host, proc.port) == 1
        sock.settimeout(30)
        reply = sock.recv(100)  # the queued request is answered once loading is done
    assert reply.startswith(b"HTTP/1.1 200")
    assert accept_queue(proc.host, proc.port) == 0
    # By the simulator's own log, serving began after the 120 engine seconds of loading it announced.
    loaded = await asyncio.to_thread(read_until, proc.popen, "GPU KV cache size")
    assert "loading model for 120.0 engine s" in proc.bound_line
    assert (logged_at(loaded) - logged_at(proc.bound_line)).total_seconds() >= 120 / 100 - 0.002


async def test_twenty_instances_share_two_cores_and_idle_ones_use_no_cpu(spawn: Spawn) -> None:
    procs = spawn(*(base_args(scale=100.0) for _ in range(20)))
    await asyncio.gather(*(wait_ready(p.base, within=60) for p in procs))
    body = {"model": MODEL, "prompt": "hello", "max_tokens": 16, "ignore_eos": True}
    async with aiohttp.ClientSession() as session:

        async def one(p: Proc) -> int:
            async with session.post(p.base + "/v1/completions", json=body) as resp:
                usage = (await resp.json())["usage"]
                return int(usage["completion_tokens"])

        assert await asyncio.gather(*(one(p) for p in procs)) == [16] * 20
    await parked(procs[0])  # its step loop waits on its event: from here on it should spend nothing
    idle = procs[0].popen.pid
    before = cpu_seconds(idle)
    await asyncio.sleep(3)
    used = cpu_seconds(idle) - before
    assert used <= 0.03, f"idle simulator used {used:.3f} s of CPU in 3 s"
    assert all(p.popen.poll() is None for p in procs)
