"""Issue 40 item 2 end to end: a P/D split's pools scale apart on the local control plane, engines simulated
at 30x (AIS_SIM_TIME_SCALE).

The clients play vllm-router's two legs (a prefill leg of one token whose kv_transfer_params a decode leg then
pulls, as tests/e2e/test_disaggregation.py does), each leg to a Ready pod of its role. A prefill-heavy phase
(long prompts, four output tokens) must grow the prefill pool and leave the decode pool alone; a decode-heavy
phase (short prompts, long answers) must grow the decode pool while the prefill pool goes back down, both
within the decode-per-prefill ratio. The parent's status lists both pools' decisions. Cost: 66-126 s in lane
B (a pair coming up, two phases on short windows: scale-up 4 s, scale-down 15 s), five fake nodes.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from harness.cluster import Cluster, KubectlError, wait_for
from tests.e2e.operator_fixtures import (
    FAST,
    MODEL,
    AddNodes,
    Proc,
    ais,
    condition,
    events,
    example,
    label_nodes,
    live_pods,
)

pytestmark = pytest.mark.usefixtures("delete_services_first")

ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
DECODE_SLOTS = 4
AUTOSCALING = {
    "minReplicas": 1,
    "maxReplicas": 3,
    "scaleUpWindowSeconds": 4,
    "panicWindowSeconds": 2,
    "scaleDownWindowSeconds": 15,
    "pd": {
        "prefill": {"maxReplicas": 2, "targets": {"queuedPromptTokensPerReplica": 16384}},
        "decode": {"maxReplicas": 3},
        "decodePerPrefill": {"atLeast": 0.5, "atMost": 3},
    },
}


def _ready(cluster: Cluster, namespace: str, service: str) -> list[str]:
    return sorted(
        f"http://{p['status']['podIP']}:8000"
        for p in live_pods(cluster, namespace, service)
        if p["status"].get("podIP")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
    )


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


class Legs:
    """Closed-loop clients sending each request as the router does: prefill leg, then decode leg."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.urls: dict[str, list[str]] = {"prefill": [], "decode": []}
        self.shape = (256, 4)  # prompt tokens, output tokens
        self.clients = 0
        self.stop = threading.Event()
        self.ok = 0
        self.failed: list[str] = []
        self.threads: list[threading.Thread] = []

    def refresh(self) -> None:
        while not self.stop.is_set():
            for role in self.urls:
                with contextlib.suppress(KubectlError):  # a kubectl hiccup: keep the last list
                    self.urls[role] = _ready(self.cluster, self.namespace, f"pd-{role}") or self.urls[role]
            self.stop.wait(0.5)

    def prefill_leg(self, n: int, body: dict[str, Any]) -> dict[str, Any]:
        """The prefill leg; a connection refused (the engine never got the request: a drained pod gone before
        this client's list caught up) is sent again to another Ready prefill engine, once."""
        urls = self.urls["prefill"]
        try:
            return _post(urls[n % len(urls)], body)
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, ConnectionRefusedError):
                raise
            urls = _ready(self.cluster, self.namespace, "pd-prefill")
            return _post(urls[(n + 1) % len(urls)], body)

    def client(self, i: int) -> None:
        n = i
        while not self.stop.is_set() and i < self.clients:
            prompt, output = self.shape
            decode = self.urls["decode"]
            n += 1
            leg = {
                "do_remote_decode": True,
                "do_remote_prefill": False,
                "remote_engine_id": None,
                "remote_block_ids": None,
                "remote_host": None,
                "remote_port": None,
            }
            common = {"model": MODEL, "prompt": f"{uuid.uuid4().hex} go", "sim_prompt_tokens": prompt}
            try:
                first = self.prefill_leg(n, {**common, "max_tokens": 1, "kv_transfer_params": leg})
                params = first["kv_transfer_params"]
                _post(
                    decode[n % len(decode)],
                    {**common, "max_tokens": output, "ignore_eos": True, "kv_transfer_params": params},
                )
                self.ok += 1
            except (urllib.error.URLError, OSError, KeyError) as exc:
                self.failed.append(f"{time.strftime('%H:%M:%S')} {exc!r}")

    def run(self, *, clients: int, prompt: int, output: int) -> None:
        """Now `clients` clients, each request `prompt` tokens in and `output` out."""
        self.shape = (prompt, output)
        more = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(self.clients, clients)]
        self.clients = clients
        for thread in more:
            thread.start()
        self.threads += more

    def __enter__(self) -> Legs:
        for role in self.urls:
            self.urls[role] = _ready(self.cluster, self.namespace, f"pd-{role}")
        refresher = threading.Thread(target=self.refresh, daemon=True)
        refresher.start()
        self.threads.append(refresher)
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=150)


def test_a_prefill_heavy_then_a_decode_heavy_load_moves_the_pools_apart(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Any
) -> None:
    label_nodes(cluster, add_nodes(5), namespace)
    attach()
    # the pool settings need a split: the API server refuses them without one, naming the field (CEL)
    lone = example("lone", node_label=namespace, autoscaling={**AUTOSCALING, "pd": {}})
    with pytest.raises(KubectlError, match=r"spec\.autoscaling\.pd"):
        cluster.apply(lone, namespace=namespace)

    body = example("pd", node_label=namespace, router=ROUTER, health=FAST, rollout={"drainSeconds": 20})
    decode_engine = {**body["spec"]["engine"], "maxNumSeqs": DECODE_SLOTS}
    body["spec"]["disaggregation"] = {"decode": {"engine": decode_engine}}
    body["spec"]["autoscaling"] = AUTOSCALING
    cluster.apply(body, namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "pd"), "Ready") == ("True", "AllRolesReady"),
        timeout=180,
        message="the pair Ready at one engine per pool",
    )

    def pools() -> tuple[int, int]:
        return (
            ais(cluster, namespace, "pd-prefill")["spec"]["replicas"],
            ais(cluster, namespace, "pd-decode")["spec"]["replicas"],
        )

    def router() -> tuple[int, str]:  # a new generation of its Deployment would roll every router pod
        deployment = cluster.get_json("deployment", "pd-router", "-n", namespace)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return deployment["metadata"]["generation"], args[args.index("--max-concurrent-requests") + 1]

    router_before = router()
    trace: list[tuple[str, float, tuple[int, int]]] = []
    with Legs(cluster, namespace) as legs:
        started = time.monotonic()
        legs.run(clients=8, prompt=32768, output=4)  # prefill-heavy: ~7 prompts of 32K queued on one engine
        wait_for(lambda: len(_ready(cluster, namespace, "pd-prefill")) == 2, timeout=90, message="two prefill")
        trace.append(("prefill-heavy", time.monotonic() - started, pools()))
        parent = ais(cluster, namespace, "pd")["status"]
        assert pools()[1] == 1  # decode slots idle: the decode pool was not grown

        phase = time.monotonic()
        legs.run(clients=16, prompt=64, output=1500)  # decode-heavy: 4x the decode slots, prompts trivial
        wait_for(lambda: pools() == (1, 3), timeout=120, message="prefill back to one, decode at three")
        wait_for(lambda: len(_ready(cluster, namespace, "pd-decode")) == 3, timeout=90, message="three decode")
        trace.append(("decode-heavy", time.monotonic() - phase, pools()))
        late = ais(cluster, namespace, "pd")["status"]

    router_after = router()
    ups, downs = (events(cluster, namespace, reason) for reason in ("ScaledUp", "ScaledDown"))
    print(  # the figures the issue asks for (pytest -s shows them)
        f"\nP/D pools (prefill, decode): {trace}; parent events {len(ups)} ScaledUp / {len(downs)} ScaledDown; "
        f"{legs.ok} requests ok, {len(legs.failed)} failed; router Deployment (generation, limit) {router_before} "
        f"-> {router_after}"
    )
    assert router_after == router_before == (router_before[0], str(3 * DECODE_SLOTS))  # the decode pool's most
    assert legs.failed == [], legs.failed
    roles = {r["role"]: r for r in parent["roles"]}
    assert roles["prefill"]["autoscaling"]["queuedPromptTokens"] > 16384
    assert roles["prefill"]["desiredReplicas"] == 2
    roles = {r["role"]: r for r in late["roles"]}
    assert roles["decode"]["autoscaling"]["desiredReplicas"] == 3
    assert roles["decode"]["autoscaling"]["runningRequests"] > 0
    messages = [e["message"] for e in ups + downs if e["involvedObject"]["name"] == "pd"]
    assert any(m.startswith("prefill 1 -> 2") for m in messages)
    assert any(m.startswith("decode ") and "-> 3" in m for m in messages)
    assert any(m.startswith("prefill 2 -> 1") for m in messages)
