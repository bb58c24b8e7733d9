"""`aissim attach --shared`: many pods' engines in one process, each as independent as its own `serve`."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from aissim.pods import RESTART_BACKOFF_SECONDS, Target
from aissim.shared import ContainerEvent, EngineHost, container_status
from harness.procs import rss_bytes
from tests.sim.conftest import MODEL, base_args, loopback, until, wait_ready
from tests.sim.test_processes import Spawn

CANARY = {"model": MODEL, "prompt": "Reply with OK.", "max_tokens": 4}


def target(name: str, *extra: str, ip: str | None = None) -> Target:
    """A pod whose engine runs the simulator's usual test args (scale 1000) on its own address, port 0."""
    argv = base_args(*extra)
    argv[argv.index("--host") + 1] = "0.0.0.0"  # the pod's rendered --host; the host binds the pod IP instead
    return Target(uid=f"uid-{name}", name=name, namespace="ns", ip=ip or loopback(), args=("serve", *argv), port=0)


@pytest.fixture
async def host() -> AsyncIterator[EngineHost]:
    h = EngineHost(env={})
    yield h
    await h.close()


async def up(h: EngineHost, uid: str, *, within: float = 10.0) -> str:
    """Base URL of a pod's engine once it answers /health."""
    await asyncio.wait_for(h.slots[uid].up.wait(), within)
    running = h.engines()[uid]
    base = f"http://{running.host}:{running.port}"
    await wait_ready(base, within=within)
    return base


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with session.get(url) as resp:
        return resp.status, await resp.json(content_type=None)


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with session.post(url, json=body) as resp:
        return resp.status, await resp.json(content_type=None)


async def counter(session: aiohttp.ClientSession, base: str, name: str) -> float:
    async with session.get(base + "/metrics") as resp:
        text = await resp.text()
    return sum(
        s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name
    )  # fmt: skip


async def test_a_hang_in_one_pods_engine_leaves_the_other_serving(host: EngineHost) -> None:
    a, b = target("a"), target("b")
    await host.sync([a, b], now=0.0)
    base_a, base_b = await up(host, a.uid), await up(host, b.uid)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        assert (await post(session, base_a + "/sim/faults", {"fault": "hang"}))[0] == 200
        status, body = await post(session, base_b + "/v1/completions", CANARY)
        assert status == 200
        assert body["usage"]["completion_tokens"] == 4
        assert await counter(session, base_b, "vllm:generation_tokens_total") == 4
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await post(session, base_a + "/v1/completions", CANARY)
        assert await counter(session, base_a, "vllm:generation_tokens_total") == 0
        assert (await get(session, base_b + "/sim/faults"))[1] == {"faults": []}


async def test_a_crash_ends_only_that_engine_and_it_restarts_after_the_back_off(host: EngineHost) -> None:
    a, b = target("a"), target("b")
    await host.sync([a, b], now=0.0)
    base_a, base_b = await up(host, a.uid), await up(host, b.uid)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        await post(session, base_b + "/v1/completions", CANARY)
        assert (await post(session, base_a + "/sim/faults", {"fault": "crash", "exit_code": 3}))[0] == 200
        slot = host.slots[a.uid]
        assert await asyncio.wait_for(slot.task, 5) == 3  # the exit code `serve` would have exited with
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(session, base_a + "/health")
        await host.sync([a, b], now=100.0)  # exit noticed: the back-off starts
        assert host.slots[a.uid] is slot
        await host.sync([a, b], now=100.0 + RESTART_BACKOFF_SECONDS)
        base_a2 = await up(host, a.uid)
        assert await counter(session, base_a2, "vllm:generation_tokens_total") == 0  # a fresh engine
        assert await counter(session, base_b, "vllm:generation_tokens_total") == 4  # b kept its state
        assert host.engines()[b.uid] is not None


async def test_a_gone_pod_frees_its_address_and_a_bad_command_line_exits_2(host: EngineHost) -> None:
    ip = loopback()
    with socket.socket() as probe:  # a fixed port on the pod's own IP, as a real pod's 8000
        probe.bind((ip, 0))
        port = probe.getsockname()[1]
    a = replace(target("a", ip=ip), port=port)
    await host.sync([a], now=0.0)
    await up(host, a.uid)
    await host.sync([], now=1.0)
    assert host.slots == {}
    with socket.socket() as s:  # nothing listens there any more
        assert s.connect_ex((ip, port)) != 0
    bad = replace(a, uid="uid-bad", args=(*a.args, "--no-such-flag"))
    await host.sync([bad], now=2.0)
    assert await asyncio.wait_for(host.slots[bad.uid].task, 5) == 2
    await host.sync([a], now=3.0)  # the address is free for the next pod at once
    await up(host, a.uid)


def series(text: str) -> set[tuple[str, str, tuple[str, ...]]]:
    """(family, type, label names) of every series: what a scraper sees, values aside."""
    return {
        (f.name, f.type, tuple(sorted(s.labels))) for f in text_string_to_metric_families(text) for s in f.samples
    }  # fmt: skip


async def endpoints(base: str) -> dict[str, Any]:
    """What a client of the engine sees, time-dependent fields removed."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        status, completion = await post(session, base + "/v1/completions", CANARY)
        assert status == 200
        async with session.get(base + "/health") as resp:
            health = (resp.status, await resp.read())
        models = (await get(session, base + "/v1/models"))[1]
        for model in models["data"]:
            model.pop("created")
            model.pop("permission")  # a fresh ModelPermission (random id, created) per call, as vLLM's
        state = (await get(session, base + "/sim/state"))[1]
        async with session.get(base + "/metrics") as resp:
            metrics = series(await resp.text())
        return {
            "health": health,
            "version": await get(session, base + "/version"),
            "models": models,
            "completion": (sorted(completion), completion["usage"], completion["choices"][0]["finish_reason"]),
            "faults": await get(session, base + "/sim/faults"),
            "config": state["config"],
            "state_keys": sorted(state),
            "metrics": metrics,
            "start_only_fault": await post(session, base + "/sim/faults", {"fault": "slow-start"}),
        }


async def test_endpoints_match_those_of_serve(host: EngineHost, spawn: Spawn) -> None:
    shared = target("a")
    (proc,) = spawn(list(shared.args[1:]))
    await wait_ready(proc.base)
    await host.sync([shared], now=0.0)
    base = await up(host, shared.uid)
    served, hosted = await endpoints(proc.base), await endpoints(base)
    served["config"]["known"].pop("host")  # the flag given; each bound the address it was told to
    hosted["config"]["known"].pop("host")
    assert hosted == served
    assert len(served["metrics"]) > 50


def rss_mb(pid: int | str) -> float:
    return rss_bytes(Path(f"/proc/{pid}/status").read_text()) / 1e6


async def test_an_idle_engine_costs_a_fraction_of_a_process(host: EngineHost, spawn: Spawn) -> None:
    """200 engines must fit a 2-core scale run: each idle one in the shared process is far below a `serve`."""
    (proc,) = spawn(base_args())
    await wait_ready(proc.base)
    process_mb = rss_mb(proc.popen.pid)
    gc.collect()
    before = rss_mb("self")
    pods = [target(f"p{i}") for i in range(40)]
    await host.sync(pods, now=0.0)
    for pod in pods:
        await up(host, pod.uid)
    per_engine_mb = (rss_mb("self") - before) / len(pods)
    assert per_engine_mb < 1.0, per_engine_mb
    assert per_engine_mb < process_mb / 20, (per_engine_mb, process_mb)
    engines = host.engines()
    assert len(engines) == len(pods)
    # and no CPU: every idle engine's step loop waits on its event (aissim/engine.py `EngineCore.parked`)
    await until(lambda: all(core.parked for running in engines.values() for core in running.engine.cores))


async def test_a_pods_address_given_to_a_newer_pod_stops_the_old_engine(host: EngineHost) -> None:
    """A cluster gives a pod IP out again only once the old sandbox is gone: the newer pod's engine binds and
    answers at once, even when the listing still shows the older pod (the soak saw a successor unable to bind
    its IP for 70 s while the older pod's engine answered its clients)."""
    ip = loopback()
    with socket.socket() as probe:
        probe.bind((ip, 0))
        port = probe.getsockname()[1]
    old = replace(target("old", ip=ip), port=port)
    await host.sync([old], now=0.0)
    await up(host, old.uid)
    new = replace(old, uid="uid-new", name="new")
    await host.sync([old, new], now=1.0)
    assert set(host.slots) == {new.uid}
    base = await up(host, new.uid)
    await host.sync([old, new], now=2.0)  # still listed: the old pod's engine is not started again
    assert set(host.slots) == {new.uid}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        assert (await post(session, base + "/v1/completions", CANARY))[0] == 200


async def test_unreachable_stops_one_engine_answering_until_cleared(host: EngineHost) -> None:
    """A lost node's engine: nothing answers (not /health, not /metrics: the client times out, as across a
    dead link), its neighbour serves; the harness clears it through /sim/faults."""
    a, b = target("a"), target("b")
    await host.sync([a, b], now=0.0)
    base_a, base_b = await up(host, a.uid), await up(host, b.uid)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        assert (await post(session, base_a + "/sim/faults", {"fault": "unreachable"}))[0] == 200
        for path in ("/health", "/metrics"):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1.0):
                    await get(session, base_a + path)
        assert (await post(session, base_b + "/v1/completions", CANARY))[0] == 200
        async with session.delete(base_a + "/sim/faults") as resp:
            assert resp.status == 200
        assert (await post(session, base_a + "/v1/completions", CANARY))[0] == 200


async def test_a_crash_is_written_into_the_pod_status_as_the_kubelet_would() -> None:
    """Started once the engine answers (its startup probe), exit (not ready, last state terminated with the
    code), restart after the back-off (restart count up), and started and ready again once the engine answers:
    what the operator and a router see of a crash on a cluster."""
    events: list[tuple[str, ContainerEvent, int | str | None]] = []
    h = EngineHost(env={}, backoff=10.0, kubelet=lambda t, event, code: events.append((t.name, event, code)))
    try:
        a = target("a")
        await h.sync([a], now=0.0)
        base = await up(h, a.uid)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            await post(session, base + "/sim/faults", {"fault": "crash", "exit_code": 3})
        await asyncio.wait_for(h.slots[a.uid].task, 5)
        await h.sync([a], now=100.0)
        await h.sync([a], now=105.0)  # within the back-off: not yet
        await until(lambda: events == [("a", "answering", None), ("a", "exited", 3)], within=5)
        await h.sync([a], now=110.0)
        await up(h, a.uid)
        await until(lambda: events[2:] == [("a", "restarted", None), ("a", "answering", None)], within=5)
    finally:
        await h.close()


def test_the_kubelets_status_of_an_exit_a_restart_and_an_answer() -> None:
    running = {"name": "engine", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": "t0"}}}
    pod = {"status": {"containerStatuses": [running]}}
    exited = container_status(pod, "exited", 3, backoff=10)["status"]
    (engine,) = exited["containerStatuses"]
    assert engine["ready"] is False
    assert engine["lastState"]["terminated"]["exitCode"] == 3
    assert engine["lastState"]["terminated"]["startedAt"] == "t0"
    assert engine["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert {c["type"]: c["status"] for c in exited["conditions"]} == {"ContainersReady": "False", "Ready": "False"}
    restarted = container_status({"status": exited}, "restarted", None, backoff=10)["status"]
    assert restarted["containerStatuses"][0]["restartCount"] == 1
    assert restarted["containerStatuses"][0]["ready"] is False
    assert restarted["containerStatuses"][0]["started"] is False  # loading again: its startup probe fails
    assert "running" in restarted["containerStatuses"][0]["state"]
    answering = container_status({"status": restarted}, "answering", None, backoff=10)["status"]
    assert answering["containerStatuses"][0]["ready"] is True
    assert answering["containerStatuses"][0]["started"] is True
    assert answering["containerStatuses"][0]["restartCount"] == 1
    # Ready itself is KWOK's (the readiness gate must be True too): only ContainersReady is written
    assert {c["type"]: c["status"] for c in answering["conditions"]} == {"ContainersReady": "True"}
