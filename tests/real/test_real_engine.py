"""The operator judged against the real engine: vLLM 0.25.1 on CPU, at its own speed, on the local control plane.

Why: every health claim (canary readiness, the effective-config check, the stall detector, drains) was proven
against `aissim`, written beside the operator. Here `aissim attach --engine vllm` gives each engine pod the
real engine (a tiny model, the pod's own args through aissim/realengine.py's table), and the operator runs as
users run it. Health settings are the defaults except the startup grace (a real engine starts in 45-100 s on
2 cores), roll limits (several rolls in one test) and, where a test says so, a shorter stall window.

Figures (time to Ready, SIGSTOP -> roll, prefill and drain seconds) are printed for the closing notes; the
assertions are the behaviour a user relies on. At most two real engines run at once (a hung one and its
successor), ~3.7 GB each.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import signal
import string
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from harness.cluster import Cluster, wait_for
from harness.engines import engine_group, process
from tests.e2e.operator_fixtures import (
    AISSIM,
    EXIT_GRACE,
    MODEL,
    AddNodes,
    Proc,
    ais,
    condition,
    example,
    gate,
    label_nodes,
    live_pod,
    start,
)
from tests.real.conftest import failed, log_tails
from tests.real.engines import gauges, get

pytestmark = [pytest.mark.usefixtures("delete_services_first"), pytest.mark.timeout(1500)]

KEY = "real-engine-key"
#: Default health but a startup grace that covers a real engine's start and room for several rolls.
HEALTH: dict[str, Any] = {"startupGraceSeconds": 300, "rolls": {"maxPerHour": 20, "cooldownSeconds": 0}}
READY_TIMEOUT = 300.0
#: How long the request in flight through a planned roll should run: well past the operator's reaction to the
#: spec change (0.6 s on a quiet machine, 16.4 s in a loaded cold CI run), well inside spec.rollout.drainSeconds.
DRAIN_REQUEST_SECONDS = 35.0
#: The target for a hung engine: rolled within this many seconds after its progress stopped (issue 27).
ROLL_TARGET_SECONDS = 45.0


@pytest.fixture
def attach_real(
    cluster: Cluster, namespace: str, tmp_path: Path, real_vllm: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Proc]]:
    """`attach_real(**env)`: `aissim attach --engine vllm` for this test's namespace; stopped (with every
    engine's process group) at teardown, after printing the tails of the engines' logs when the test failed."""
    started: list[Proc] = []

    def run(**env: str) -> Proc:
        args = ["attach", "--namespace", namespace, "--log-dir", str(tmp_path), "--interval", "0.5"]
        args += ["--engine", "vllm", "--vllm-python", real_vllm, "--exit-grace", EXIT_GRACE]
        proc = start(
            args, program=AISSIM, log=tmp_path / "attach.log", env={"KUBECONFIG": str(cluster.kubeconfig), **env}
        )
        started.append(proc)
        return proc

    yield run
    if failed(request.node):
        print(f"\n[real] load average {Path('/proc/loadavg').read_text().strip()}\n{log_tails(tmp_path)}")
    for proc in started:
        proc.stop()


def real_service(namespace: str, *, health: dict[str, Any], auth: bool = False, **engine: Any) -> dict[str, Any]:
    """The production example without DSpark (the CPU engine has no draft head; the config check would
    rightly call it off), with `engine` fields merged."""
    body = example("svc", node_label=namespace)
    body["spec"]["engine"].pop("speculative")
    body["spec"]["engine"].update(engine)
    body["spec"]["health"] = health
    if auth:
        body["spec"]["auth"] = {"apiKeySecretRef": {"name": "engine-key", "key": "token"}}
    return body


def create_key(cluster: Cluster, namespace: str) -> None:
    data = base64.b64encode(KEY.encode()).decode()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "engine-key"}, "data": {"token": data}}
    cluster.apply(secret, namespace=namespace)


def ready(cluster: Cluster, namespace: str) -> bool:
    return condition(ais(cluster, namespace, "svc"), "Ready") == ("True", "AllReplicasReady")


def serving_pod(cluster: Cluster, namespace: str) -> dict[str, Any]:
    pod = live_pod(cluster, namespace, "svc")
    assert pod is not None
    return pod


def base_of(pod: dict[str, Any]) -> str:
    return f"http://{pod['status']['podIP']}:8000"


def prompt(tokens: int) -> str:
    """`tokens` prompt tokens on the tiny model's byte-level tokenizer; random, so no prefix cache hits."""
    return "".join(random.choices(string.ascii_letters, k=tokens))


def request(base: str, body: dict[str, Any], *, key: str | None = None, out: dict[str, Any] | None = None) -> None:
    """One completion; `out` gets its status, body and seconds."""

    async def go() -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        t0 = time.monotonic()
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session,
            session.post(f"{base}/v1/completions", json={"model": MODEL, **body}, headers=headers) as resp,
        ):
            result = {"status": resp.status, "body": await resp.json(content_type=None)}
        if out is not None:
            out.update(result, seconds=time.monotonic() - t0)

    asyncio.run(go())


def in_thread(fn: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def clients(base: str, body: dict[str, Any], *, count: int, stop: threading.Event, key: str | None) -> threading.Thread:
    """Closed-loop clients until `stop` (errors, e.g. the engine going away, only slow them down)."""

    async def go() -> None:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

            async def one() -> None:
                while not stop.is_set():
                    try:
                        async with session.post(
                            f"{base}/v1/completions", json={"model": MODEL, **body}, headers=headers
                        ) as resp:
                            await resp.read()
                    except (aiohttp.ClientError, TimeoutError):
                        await asyncio.sleep(0.5)

            await asyncio.gather(*(one() for _ in range(count)))

    return in_thread(lambda: asyncio.run(go()))


def watch_gate(
    cluster: Cluster, namespace: str, seconds: float, *, until: Callable[[], bool] | None = None
) -> list[str]:
    """The pod's readiness gate once a second for `seconds` (or until `until()`)."""
    seen, t0 = [], time.monotonic()
    while time.monotonic() - t0 < seconds and not (until and until()):
        pod = live_pod(cluster, namespace, "svc")
        if pod is None:
            seen.append("no pod")
        else:  # a missing gate names what the pod's status did hold, and whose pod it was
            types = [c["type"] for c in pod["status"].get("conditions") or []]
            seen.append(gate(pod) or f"no gate on {pod['metadata']['uid'][:8]}: {types}")
        time.sleep(1.0)
    return seen


def roll_of(cluster: Cluster, namespace: str, uid: str) -> dict[str, Any] | None:
    """The service's roll record of the pod `uid`, None until there is one."""
    rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls") or []
    return next((r for r in rolls if r["uid"] == uid), None)


#: Gate reasons that mean the health machinery judged the engine itself failing (a queued canary or a long
#: prefill must never produce them). EngineNotAnswering is the operator's own scrape going unanswered while no
#: canary has spoken for a whole canary cycle: seen in two CI runs during the queued phase on 2 cores before the
#: allowance was a whole cycle (docs/real-engine.md); it is reported, bounded, not hidden.
FAILING = ("False/CanaryFailing", "False/Stalled", "False/AwaitingCanary", "False/ConfigMismatch")


def judged_healthy(seen: list[str], *, min_passing: float = 0.9) -> None:
    """No failing verdict at all, and at least `min_passing` of the samples Ready with the canary passing."""
    assert not [g for g in seen if g in FAILING], seen
    passing = sum(g == "True/CanaryPassing" for g in seen)
    others = sorted({g for g in seen if g != "True/CanaryPassing"})
    print(f"[real] gate: {passing}/{len(seen)} samples True/CanaryPassing; others: {others}")
    assert passing >= min_passing * len(seen), seen


def decode_rate(base: str, *, key: str | None) -> float:
    """Tokens a second one stream gets from the engine now: a 400-token request, timed (its prefill and the
    HTTP round trip included, so a little under the decode rate)."""
    out: dict[str, Any] = {}
    request(base, {"prompt": "rate", "max_tokens": 400, "ignore_eos": True}, key=key, out=out)
    assert out["status"] == 200, out
    return 400 / float(out["seconds"])


def idle(base: str) -> bool:
    now = gauges(base, "vllm:num_requests_running", "vllm:num_requests_waiting")
    return now["vllm:num_requests_running"] + now["vllm:num_requests_waiting"] == 0


def prefill(cluster: Cluster, namespace: str, base: str, tokens: int) -> tuple[dict[str, Any], list[str]]:
    """One `tokens`-long prompt with 4 output tokens; its response and the gate samples taken meanwhile."""
    out: dict[str, Any] = {}
    long = in_thread(lambda: request(base, {"prompt": prompt(tokens), "max_tokens": 4}, key=KEY, out=out))
    during = watch_gate(cluster, namespace, 600, until=lambda: not long.is_alive())
    long.join()
    return out, during


def test_real_engine_ready_with_auth_config_checked_queued_canary_long_prefill_drain_and_hangs(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach_real: Callable[..., Proc]
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    create_key(cluster, namespace)
    attach_real()
    health = {**HEALTH, "stall": {"windowSeconds": 10}}
    t0 = time.monotonic()
    cluster.apply(
        real_service(namespace, health=health, auth=True, maxNumSeqs=2, maxNumBatchedTokens=256), namespace=namespace
    )
    wait_for(lambda: ready(cluster, namespace), timeout=READY_TIMEOUT, message="Ready on the real engine")
    print(f"\n[real] time to Ready (apply -> Ready, real engine start included): {time.monotonic() - t0:.1f}s")
    pod = serving_pod(cluster, namespace)
    base = base_of(pod)

    # The canary and the config check passed on the real engine: with the key (the engine refuses without).
    assert get(f"{base}/v1/models")[0] == 401
    status, models = get(f"{base}/v1/models", key=KEY)
    assert status == 200
    assert '"max_model_len":327680' in models.replace(" ", "")
    assert gate(pod) == "True/CanaryPassing"

    # A queued canary: 2 slots, 6 clients with long outputs. The canary waits behind them and gets no tokens
    # in time, yet the engine advances: the pod is never judged failing and never rolled. The API server that
    # streams to the clients also answers /metrics, and on 2 cores it can leave the operator's scrapes
    # unanswered while the canary waits: EngineNotAnswering, reported and bounded (CI 2026-12-04, 8 clients:
    # 7 of 20 samples; docs/real-engine.md), not a failure of the engine.
    stop = threading.Event()
    load = clients(base, {"prompt": "load", "max_tokens": 1000, "ignore_eos": True}, count=6, stop=stop, key=KEY)
    waiting_seen = 0.0
    seen = []
    unanswered = 0
    for i in range(20):  # each pass takes seconds here: kubectl and /metrics share 2 cores with the engine
        seen += watch_gate(cluster, namespace, 1.0)
        if i % 4 == 0 or waiting_seen < 4:
            # the test's own peek at the queue: on 2 cores the API server streaming to 8 clients has left
            # /metrics unanswered for over 20 s (CI, 2026-12-03); a missed peek is counted, not a failure
            try:
                waiting_seen = max(waiting_seen, gauges(base, "vllm:num_requests_waiting")["vllm:num_requests_waiting"])
            except AssertionError:
                unanswered += 1
    stop.set()
    print(
        f"[real] queued phase: waiting peaked at {waiting_seen:.0f}; the test's /metrics peeks unanswered: {unanswered}"
    )
    assert waiting_seen >= 4, f"the engine never queued requests (waiting peaked at {waiting_seen})"
    # never rolled (a replaced pod shows only as "no gate" samples of a new uid: the roll says why)
    rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls")
    assert not rolls, f"the queued engine was rolled: {rolls}"
    judged_healthy(seen, min_passing=0.5)
    load.join(timeout=300)
    wait_for(lambda: idle(base), timeout=300, message="the load's requests finished")

    # A lone chunked prefill longer than two stall windows: only the KV gauge moves until it completes. Never
    # unready, never rolled. How long a prompt takes depends on the machine (32K tokens in 256-token chunks:
    # 75 s on a loaded 2-core run, 17 s on an idle one; attention makes it quadratic, 64K took 200 s loaded and
    # 15.5 s on another run), so the prompt doubles, up to 128K (the service's 327680 fits the engine's KV),
    # until one prefill has outlasted two windows, and every one is judged.
    window = health["stall"]["windowSeconds"]
    kv0 = gauges(base, "vllm:kv_cache_usage_perc")["vllm:kv_cache_usage_perc"]
    for tokens in (32_768, 65_536, 131_072):
        out, during = prefill(cluster, namespace, base, tokens)
        assert out["status"] == 200, out
        print(f"[real] {tokens}-token chunked prefill at MBT 256: {out['seconds']:.1f}s; gate samples {len(during)}")
        judged_healthy(during)
        if out["seconds"] > 2 * window:
            break
    assert out["seconds"] > 2 * window, f"no prefill outlasted two stall windows ({window}s each): {out}"
    assert gauges(base, "vllm:kv_cache_usage_perc")["vllm:kv_cache_usage_perc"] >= kv0
    assert not (ais(cluster, namespace, "svc").get("status") or {}).get("rolls")

    # A planned roll (spec change) drains: the gate goes False, the in-flight request completes with all its
    # tokens and 200, and only then is the pod deleted.
    inflight: dict[str, Any] = {}
    # A request sized to last ~DRAIN_REQUEST_SECONDS at the speed the engine decodes now: a fixed 6000 tokens
    # took 25 s on a quiet machine and 12 s in a cold CI run whose operator took 16.4 s to start the drain
    # (2500 tokens had once ended before the gate went False)
    tokens = min(max(int(decode_rate(base, key=KEY) * DRAIN_REQUEST_SECONDS), 6000), 40_000)
    first_uid = pod["metadata"]["uid"]
    running = in_thread(
        lambda: request(base, {"prompt": "drain", "max_tokens": tokens, "ignore_eos": True}, key=KEY, out=inflight)
    )
    wait_for(lambda: not idle(base), timeout=30, message="the in-flight request runs")
    patched = time.monotonic()
    # the change also puts the default stall window back: the hang checks below run on the successor engine at
    # the defaults a user gets (one engine start shared instead of a service of their own)
    change = {"spec": {"engine": {"maxNumSeqs": 3}, "health": {**HEALTH, "stall": None}}}  # null: the default
    cluster.kubectl("patch", "ais", "svc", "-n", namespace, "--type=merge", "-p", json.dumps(change))
    wait_for(lambda: gate(serving_pod(cluster, namespace)) == "False/Draining", timeout=60, message="draining")
    drain_start = time.monotonic()
    print(f"[real] spec change -> gate False/Draining: {drain_start - patched:.1f}s ({tokens}-token request in flight)")
    assert running.is_alive(), "the request ended before the drain began: nothing was drained"
    running.join(timeout=600)
    assert inflight["status"] == 200, inflight
    assert inflight["body"]["usage"]["completion_tokens"] == tokens
    roll = wait_for(lambda: roll_of(cluster, namespace, first_uid), timeout=120, message="the drained pod's roll")
    print(f"[real] drain: {time.monotonic() - drain_start:.1f}s from the gate going False; roll {roll}")
    assert (roll["reason"], roll["drain"]) == ("SpecChanged", "Completed")
    wait_for(lambda: ready(cluster, namespace), timeout=READY_TIMEOUT, message="Ready again after the spec change")

    # The seed's hang on the successor, at the default stall window: a stopped VLLM::EngineCore under load, then
    # a stopped VLLM::Worker at idle. /health stays 200; each is rolled within the target of its last progress.
    figures = {
        "EngineCore under load": hang(cluster, namespace, title="VLLM::EngineCore", under_load=True, key=KEY),
        # the last roll's successor is not waited for: the first hang showed a fresh engine Ready after a roll
        "Worker at idle": hang(cluster, namespace, title="VLLM::Worker", under_load=False, successor=False),
    }
    print(f"[real] SIGSTOP -> roll seconds: {figures}")


def test_an_asked_max_model_len_the_engine_does_not_run_is_a_config_mismatch(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach_real: Callable[..., Proc]
) -> None:
    # The seed's lost continuation line, on the real engine: --max-model-len never reaches vLLM, which then
    # runs the model's own 1048576 positions. /v1/models says so; the operator holds the pod out.
    label_nodes(cluster, add_nodes(1), namespace)
    attach_real(AIS_SIM_DROP_ARGS="--max-model-len")
    cluster.apply(real_service(namespace, health=HEALTH), namespace=namespace)

    def mismatch() -> str | None:
        pod = live_pod(cluster, namespace, "svc")
        return gate(pod) if pod and (gate(pod) or "").endswith("/ConfigMismatch") else None

    assert wait_for(mismatch, timeout=READY_TIMEOUT, message="ConfigMismatch") == "False/ConfigMismatch"
    status = ais(cluster, namespace, "svc").get("status") or {}
    assert "maxModelLen: expected 327680, engine reports 1048576" in str(status), status
    assert not status.get("rolls"), "a mismatch is held out, not rolled: a new pod would run the same args"


def hang(
    cluster: Cluster, namespace: str, *, title: str, under_load: bool, key: str | None = None, successor: bool = True
) -> float:
    """SIGSTOP the serving pod's `title` process (at idle, or under 4 clients); /health stays 200; the pod is
    rolled within ROLL_TARGET_SECONDS of its last progress and (with `successor`) a fresh engine is Ready.
    Returns stop -> roll seconds."""
    pod = serving_pod(cluster, namespace)
    uid, base = pod["metadata"]["uid"], base_of(pod)
    pgid = engine_group(pod["status"]["podIP"], 8000)
    assert pgid is not None, "no real engine process group for the pod"
    victim = process(pgid, title)
    stop = threading.Event()
    load = None
    if under_load:
        # 8000 tokens each (~16 s alone): the engine is never between two requests when it is stopped (with 800,
        # one run stopped it between them and the stall it judged was the canary's, not the clients')
        load = clients(base, {"prompt": "x", "max_tokens": 8000, "ignore_eos": True}, count=4, stop=stop, key=key)
        wait_for(lambda: gauges(base, "vllm:num_requests_running")["vllm:num_requests_running"] >= 1, timeout=30,
                 message="requests running before the hang")  # fmt: skip
    os.kill(victim, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        time.sleep(12)
        assert get(f"{base}/health", timeout=5)[0] == 200, "/health should still answer 200 on a hung engine"
        running = gauges(base, "vllm:num_requests_running")["vllm:num_requests_running"]
        print(
            f"[real] {title} stopped {'under load' if under_load else 'at idle'}: /health 200, running gauge {running}"
        )
        if under_load:  # the engine's last stats before the stop: the clients' requests were in it
            assert running > 0, "stopped under load, yet no request was running"

        roll = wait_for(
            lambda: roll_of(cluster, namespace, uid), timeout=120, interval=0.5, message=f"{title} stopped: a roll"
        )
        took = time.monotonic() - stopped_at
    finally:
        stop.set()  # the stopped process goes with its pod: attach SIGKILLs the pod's whole process group
    print(f"[real] SIGSTOP {title} -> roll record: {took:.1f}s ({roll['reason']}: {roll.get('message')})")
    assert roll["reason"] == "Stalled", roll
    assert took <= ROLL_TARGET_SECONDS + 5, f"rolled {took:.1f}s after the stop (target {ROLL_TARGET_SECONDS}s)"
    if load is not None:
        load.join(timeout=60)
    if not successor:
        return took
    t0 = time.monotonic()
    wait_for(lambda: ready(cluster, namespace), timeout=READY_TIMEOUT, message="Ready on a fresh real engine")
    fresh = serving_pod(cluster, namespace)
    assert fresh["metadata"]["uid"] != uid
    print(f"[real] successor Ready {time.monotonic() - t0:.1f}s after the roll")
    return took
