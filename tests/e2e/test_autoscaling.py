"""Issue 40 end to end: spec.autoscaling on the local control plane, engines simulated at 30x.

One replica with {minReplicas 1, maxReplicas 2} and a router (spec.router) under a queue that lasts
(closed-loop clients, twice the engine's slots) gets a second Ready replica, and returns to one after the
load stops, with no failed client request and the router's Deployment untouched by either step (no router
pod restarts: it is sized for maxReplicas). The clients send only to pods whose Ready condition is True (the
operator's gate), as the router and the Service do. Windows are short here (scale-up 5 s, scale-down 15 s);
the defaults and why are in docs/autoscaling.md.

Then the ecosystem path on the same service: examples/hpa-dsv4-flash.yaml, pointed at it, is applied. The
real HPA controller (kube-controller-manager) reads the scale subresource, writes its minReplicas (2) into
spec.replicas, and reports its metric unavailable (no custom metrics API here); the operator names the HPA
in its Autoscaling condition and writes nothing for longer than its scale-down window, though it would
otherwise scale the idle service back at once; with the HPA deleted it resumes and scales back to one.

Cost (2026-12-05, nice -n 5, lane A): 89-98 s; the same test without the HPA part took 67 s, so it adds
~22 s, most of it the hold past the operator's scale-down window (the HPA controller takes a new HPA at once
and re-reads it every 15 s). The router adds nothing measurable (KWOK plays its pod).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import yaml

from harness.cluster import ROOT, Cluster, wait_for
from tests.e2e.operator_fixtures import (
    FAST,
    MODEL,
    AddNodes,
    Proc,
    ais,
    attach,  # noqa: F401 (a fixture)
    condition,
    events,
    example,
    label_nodes,
    live_pods,
    ready,
)

AUTOSCALING = {"minReplicas": 1, "maxReplicas": 2, "scaleUpWindowSeconds": 5, "scaleDownWindowSeconds": 15}
SLOTS = 4  # engine.maxNumSeqs: 8 clients keep 4 running and 4 waiting on one replica
ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
HPA_EXAMPLE = ROOT / "examples" / "hpa-dsv4-flash.yaml"
HPA = "svc-hpa"
BODY = {"model": MODEL, "prompt": "queue", "sim_prompt_tokens": 256, "max_tokens": 400, "ignore_eos": True}


def ready_urls(cluster: Cluster, namespace: str) -> list[str]:
    return sorted(
        f"http://{p['status']['podIP']}:8000"
        for p in live_pods(cluster, namespace, "svc")
        if p["status"].get("podIP")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    )


def _now() -> str:
    """Wall-clock UTC with tenths, as status.rolls' times are read beside it."""
    return time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 10) % 10}"


class Load:
    """Closed-loop clients over the Ready pods (the list refreshed every 0.5 s); every answer is counted.
    A failure and each change of the list are kept with their wall time (`changes`), to read beside the
    operator's status.rolls when a request is lost."""

    def __init__(self, cluster: Cluster, namespace: str, clients: int) -> None:
        self.cluster, self.namespace, self.clients = cluster, namespace, clients
        self.urls: list[str] = []
        self.stop = threading.Event()
        self.ok = 0
        self.failed: list[str] = []
        self.changes: list[str] = []
        self.threads = [
            threading.Thread(target=self._refresh, daemon=True),
            threading.Thread(target=self._run, daemon=True),
        ]

    def __enter__(self) -> Load:
        self.urls = ready_urls(self.cluster, self.namespace)
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=120)

    def _refresh(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):  # a kubectl hiccup: keep the last list
                urls = ready_urls(self.cluster, self.namespace) or self.urls
                if urls != self.urls:
                    self.changes.append(f"{_now()} clients send to {', '.join(urls)}")
                self.urls = urls
            self.stop.wait(0.5)

    def _run(self) -> None:
        async def go() -> None:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:

                async def client(i: int) -> None:
                    n = i
                    while not self.stop.is_set():
                        urls = self.urls
                        url = urls[n % len(urls)]
                        n += 1
                        try:
                            async with session.post(url + "/v1/completions", json=BODY) as resp:
                                await resp.read()
                                if resp.status == 200:
                                    self.ok += 1
                                else:
                                    self.failed.append(f"{_now()} {url}: HTTP {resp.status}")
                        except (aiohttp.ClientError, TimeoutError) as exc:
                            self.failed.append(f"{_now()} {url}: {exc!r}")

                await asyncio.gather(*(client(i) for i in range(self.clients)))

        asyncio.run(go())


def router(cluster: Cluster, namespace: str) -> tuple[int, str, tuple[str, ...]]:
    """The router Deployment's generation, its pods' pod-template-hash and names: a rolled router changes
    the first two, a restarted router pod the names."""
    deployment = cluster.get_json("deployment", "svc-router", "-n", namespace)
    selector = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items())
    listed = cluster.get_json("pods", "-n", namespace, "-l", selector)["items"]
    live = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
    hashes = ",".join(sorted({p["metadata"]["labels"].get("pod-template-hash", "") for p in live}))
    return deployment["metadata"]["generation"], hashes, tuple(sorted(p["metadata"]["name"] for p in live))


def hpa_conditions(cluster: Cluster, namespace: str) -> dict[str, tuple[str, str]]:
    body = cluster.get_json("hpa", HPA, "-n", namespace)
    return {c["type"]: (c["status"], c["reason"]) for c in (body.get("status") or {}).get("conditions") or []}


def one_replica(cluster: Cluster, namespace: str) -> bool:
    return ais(cluster, namespace, "svc")["spec"]["replicas"] == 1 and len(live_pods(cluster, namespace, "svc")) == 1


def an_hpa_holds_the_operator_until_it_goes(cluster: Cluster, namespace: str) -> list[str]:
    """examples/hpa-dsv4-flash.yaml pointed at the idle autoscaled service, with minReplicas 2 so the HPA
    controller writes without a metric; what the operator and the HPA did, as lines to print."""
    hpa = yaml.safe_load(HPA_EXAMPLE.read_text())
    hpa["metadata"]["name"] = HPA
    hpa["spec"]["scaleTargetRef"]["name"] = "svc"
    hpa["spec"]["minReplicas"] = 2
    downs = len(events(cluster, namespace, "ScaledDown"))
    cluster.apply(hpa, namespace=namespace)
    applied = time.monotonic()
    # the HPA controller takes a new HPA at once: its minReplicas goes through the scale subresource (no metric
    # needed). The operator's pass reads the spec before it lists HPAs, so it never sees the 2 without the HPA.
    wait_for(lambda: ais(cluster, namespace, "svc")["spec"]["replicas"] == 2, timeout=60, message="the HPA writes 2")
    written = time.monotonic()
    wait_for(
        lambda: condition(ais(cluster, namespace, "svc"), "Autoscaling") == ("False", "OtherAutoscaler"),
        timeout=60,
        message="the operator names the HPA",
    )
    named = time.monotonic() - applied
    said = next(c for c in ais(cluster, namespace, "svc")["status"]["conditions"] if c["type"] == "Autoscaling")
    assert f"HorizontalPodAutoscaler {HPA} " in said["message"]
    # Idle, with the one replica it would keep Ready, the operator alone would scale back to one at its next
    # pass (its window holds only idle wants, its last scale is older than the window): it must not, for
    # longer than its scale-down window. Meanwhile the HPA's replica comes up, and the HPA's next sync (15 s)
    # reads its metric for the pods status.selector selects.
    hold = AUTOSCALING["scaleDownWindowSeconds"] + 3
    while True:
        assert ais(cluster, namespace, "svc")["spec"]["replicas"] == 2, "the operator wrote under an HPA"
        active = hpa_conditions(cluster, namespace).get("ScalingActive")
        serving = len(ready_urls(cluster, namespace))
        if time.monotonic() - written >= hold and active is not None and active[0] == "False" and serving == 2:
            break
        assert time.monotonic() - written < 90, f"the HPA's ScalingActive {active}, {serving} Ready"
        time.sleep(1)
    assert len(events(cluster, namespace, "ScaledDown")) == downs
    seen = cluster.get_json("hpa", HPA, "-n", namespace)
    conditions = hpa_conditions(cluster, namespace)
    assert conditions["AbleToScale"][0] == "True"  # it got (and updated) the scale subresource
    # past the selector (an empty one is InvalidSelector): the pods' metric is what is missing here
    assert conditions["ScalingActive"] == ("False", "FailedGetPodsMetric")
    assert seen["status"]["currentReplicas"] == 2
    rescaled = [e["message"] for e in events(cluster, namespace, "SuccessfulRescale")]
    why = next(c["message"] for c in seen["status"]["conditions"] if c["type"] == "ScalingActive")
    held = time.monotonic() - written

    cluster.kubectl("delete", "hpa", HPA, "-n", namespace)
    deleted = time.monotonic()
    wait_for(
        lambda: condition(ais(cluster, namespace, "svc"), "Autoscaling") == ("True", "FollowingLoad"),
        timeout=60,
        message="the operator's autoscaler back",
    )
    wait_for(lambda: one_replica(cluster, namespace), timeout=90, message="back to one after the HPA")
    resumed = time.monotonic() - deleted
    last = [e["message"] for e in events(cluster, namespace, "ScaledDown")]
    assert len(last) == downs + 1, last
    return [
        f"HPA: the operator named it {named:.1f} s after the apply; the HPA controller wrote spec.replicas 2 "
        f"{written - applied:.1f} s after the apply ({'; '.join(rescaled)})",
        f"HPA: the operator held spec.replicas at 2 for {held:.1f} s; HPA conditions "
        f"{sorted(conditions.items())}, currentReplicas {seen['status']['currentReplicas']}",
        f"HPA: ScalingActive says: {why}",
        f"HPA: deleted, the operator scaled back to one in {resumed:.1f} s",
    ]


def test_a_lasting_queue_gets_a_second_replica_and_idle_returns_to_one(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Callable[..., Proc]
) -> None:
    began = time.monotonic()
    label_nodes(cluster, add_nodes(2), namespace)
    attach()
    spec: dict[str, Any] = {
        "replicas": 1,
        "health": FAST,
        "engine": {"maxNumSeqs": SLOTS},
        "rollout": {"drainSeconds": 30},
        "autoscaling": AUTOSCALING,
        "router": ROUTER,
    }
    cluster.apply(example("svc", node_label=namespace, **spec), namespace=namespace)
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=120, message="Ready at one replica")
    wait_for(lambda: router(cluster, namespace)[2] != (), timeout=60, message="a router pod")
    router_at_one = router(cluster, namespace)

    with Load(cluster, namespace, clients=2 * SLOTS) as load:
        started = time.monotonic()
        wait_for(lambda: len(ready_urls(cluster, namespace)) == 2, timeout=90, message="a second Ready replica")
        to_two = time.monotonic() - started
        scaled = ais(cluster, namespace, "svc")["status"].get("autoscaling") or {}
        router_at_two = router(cluster, namespace)
        time.sleep(3)  # both replicas serve the load for a few requests
    idle = time.monotonic()
    wait_for(lambda: one_replica(cluster, namespace), timeout=90, message="back to one replica")
    to_one = time.monotonic() - idle
    wait_for(lambda: ready(cluster, namespace, "svc"), timeout=60, message="Ready at one replica again")
    router_back = router(cluster, namespace)

    # the autoscaler's own events say "N -> M: why"
    ups, downs = (
        [e for e in events(cluster, namespace, reason) if re.match(r"\d+ -> \d+: ", e.get("message", ""))]
        for reason in ("ScaledUp", "ScaledDown")
    )
    print(  # the figures the issue asks for, one a line (pytest -s shows them)
        f"\nautoscaling: queue began -> second Ready replica: {to_two:.1f} s"
        f"\nautoscaling: idle -> one replica: {to_one:.1f} s"
        f"\nautoscaling: scale events: {len(ups)} ScaledUp, {len(downs)} ScaledDown"
        f"\nautoscaling: client requests: {load.ok} ok, {len(load.failed)} failed"
        f"\nautoscaling: router (generation, pod-template-hash, pods) at 1 / 2 / 1 replicas: {router_at_one} / "
        f"{router_at_two} / {router_back}"
    )
    assert load.failed == [], "\n".join([*load.failed, *load.changes])
    assert load.ok > 0
    assert (len(ups), len(downs)) == (1, 1)  # no flapping
    assert scaled.get("desiredReplicas") == 2
    assert scaled.get("reason") in ("ScaledUp", "Steady")
    # sized for maxReplicas: neither scale step rolled the router nor restarted its pod
    assert router_at_one == router_at_two == router_back
    # the autoscaler's next decision records the one replica (a health pass after the scale-down: on a loaded
    # machine that pass can come after Ready)
    wait_for(
        lambda: ais(cluster, namespace, "svc")["status"]["autoscaling"]["currentReplicas"] == 1,
        timeout=60,
        message="status.autoscaling at one replica",
    )

    def following_load() -> bool:
        """The Autoscaling condition True again. The reconcile loop writes it; the decision's status.autoscaling
        is patched by the health loop at once, so it can show one replica a pass before the condition has left
        its hold (a warm CI run, 2026-12-05, read it in between)."""
        said = [c for c in ais(cluster, namespace, "svc")["status"]["conditions"] if c["type"] == "Autoscaling"]
        assert said, "no Autoscaling condition"
        assert said[0]["status"] == "True", said
        return True

    wait_for(following_load, timeout=30, message="the Autoscaling condition True at one replica")
    roll = ais(cluster, namespace, "svc")["status"]["lastRoll"]
    assert (roll["reason"], roll["drain"]) == ("ScaleDown", "Completed")

    hpa_start = time.monotonic()
    lines = an_hpa_holds_the_operator_until_it_goes(cluster, namespace)
    print("\n".join(f"autoscaling: {line}" for line in lines))
    print(
        f"autoscaling: wall time {time.monotonic() - began:.1f} s, of which the HPA part "
        f"{time.monotonic() - hpa_start:.1f} s"
    )
