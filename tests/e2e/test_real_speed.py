"""Issue 12 end to end at real engine speed (time scale 1) with default health settings.

Why real speed: a canary queued behind 32 running requests waits as long as the seed's C64 requests do (TTFT
28.56 s), longer than the canary's 10 s timeout; at 30x engine speed the queue drains in a second and the
bug (the pod taken out of the Service by its own health check) cannot show.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests.e2e.cluster import Cluster, wait_for
from tests.e2e.operator_fixtures import (
    AddNodes,
    Proc,
    ais,
    background_requests,
    condition,
    example,
    gate,
    label_nodes,
    live_pod,
    post,
    ready,
)

pytestmark = [pytest.mark.usefixtures("delete_services_first"), pytest.mark.timeout(600)]

#: The seed's peak: 64 clients, 1K-token prompts, 512 fixed output tokens (docs/FACTS.md TP8 sweep).
C64_BODY = {"prompt": "c64", "sim_prompt_tokens": 1024, "max_tokens": 512, "ignore_eos": True}
LOAD_SECONDS = 120


def test_c64_at_real_speed_keeps_the_service_ready_then_an_idle_hang_is_rolled(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    label_nodes(cluster, add_nodes(1), namespace)
    attach(AIS_SIM_TIME_SCALE="1")
    cluster.apply(example("svc", node_label=namespace), namespace=namespace)  # default health settings
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=180, message="Ready")
    pod = live_pod(cluster, namespace, "svc")
    assert pod is not None
    base = f"http://{pod['status']['podIP']}:8000"
    model = ais(cluster, namespace, "svc")["spec"]["model"]["servedName"]

    stop = threading.Event()
    load = background_requests(base, {"model": model, **C64_BODY}, clients=64, stop=stop)
    seen: list[tuple[float, str | None, tuple[str, str] | None]] = []
    start = time.monotonic()
    while time.monotonic() - start < LOAD_SECONDS:
        now = live_pod(cluster, namespace, "svc")
        seen.append(
            (time.monotonic() - start, gate(now) if now else None, condition(ais(cluster, namespace, "svc"), "Ready"))
        )
        time.sleep(1.0)
    stop.set()
    load.join(timeout=120)  # in-flight requests finish (each ~30 s queued + ~30 s decoding)
    assert not load.is_alive()

    down = [(t, g, r) for t, g, r in seen if g != "True/CanaryPassing" or r != ("True", "AllReplicasReady")]
    assert not down, f"readiness lost under C64 at real speed: {down[:5]} ... ({len(down)} of {len(seen)} polls)"
    status = ais(cluster, namespace, "svc").get("status") or {}
    assert not status.get("rolls"), status.get("rolls")

    # A lone 256K prefill at real speed (~55 s): no token counter moves until it completes, only KV does.
    long = {"model": model, "prompt": "long", "sim_prompt_tokens": 262_144, "max_tokens": 4, "ignore_eos": True}
    prefill = threading.Thread(target=post, args=(base, "/v1/completions", long), daemon=True)
    prefill.start()
    start, during = time.monotonic(), []
    while prefill.is_alive() and time.monotonic() - start < 90:
        now = live_pod(cluster, namespace, "svc")
        during.append(gate(now) if now else None)
        time.sleep(1.0)
    assert not prefill.is_alive()
    assert time.monotonic() - start >= 30, "the prefill was not long: nothing judged during it"
    assert set(during) == {"True/CanaryPassing"}, during

    # Now idle: only the operator's canary asks anything of the engine, and the engine stops answering.
    uid = pod["metadata"]["uid"]
    post(base, "/sim/faults", {"fault": "hang"})
    hung_at = time.monotonic()
    wait_for(lambda: ((ais(cluster, namespace, "svc").get("status") or {}).get("lastRoll") or {}).get("reason")
             == "Stalled", timeout=60, message="the idle hang rolled within 60 s")  # fmt: skip
    took = time.monotonic() - hung_at
    wait_for(lambda: (p := live_pod(cluster, namespace, "svc")) is not None and p["metadata"]["uid"] != uid
             and ready(cluster, namespace, "svc"),
             timeout=120, message="Ready again on a new pod")  # fmt: skip
    rolls = (ais(cluster, namespace, "svc").get("status") or {}).get("rolls") or []
    assert [r["reason"] for r in rolls] == ["Stalled"], rolls
    print(f"C64 {LOAD_SECONDS}s at scale 1: 0 of {len(seen)} polls unready; lone 256K prefill: 0 of {len(during)}"
          f" polls unready; idle hang rolled after {took:.1f}s")  # fmt: skip
