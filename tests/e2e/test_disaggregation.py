"""spec.disaggregation on a real control plane: what `kubectl apply` refuses, and a P/D pair brought up.

Why it exists: the P/D rules are CEL in the CRD, so the API server itself (not the operator) must refuse a
pair vllm-ascend would refuse at engine start, naming the field; and a pair the operator accepts must come up
as two role services with bound engine pods carrying the connector's settings, a router in P/D mode, a
NetworkPolicy letting the roles reach each other, and a parent whose status says when both roles serve. A
scale of the parent must reach both roles with the ratio kept, and removing the split must remove the roles.
"""

from __future__ import annotations

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
    example,
    label_nodes,
    live_pods,
    post,
)
from tests.e2e.passes import metric_values
from tests.e2e.test_router import router_bin  # noqa: F401  (the module-scoped fixture: vllm-router installed)

pytestmark = pytest.mark.usefixtures("delete_services_first")

ROUTER = {"image": "registry.example/vllm-router:0.1.17"}


def split(name: str, namespace: str, **pd: Any) -> dict[str, Any]:
    body = example(name, node_label=namespace, router=ROUTER)
    body["spec"]["disaggregation"] = pd
    return body


@pytest.mark.parametrize(
    ("pd", "spec", "message"),
    [
        (
            {"prefill": {"parallelism": {"tensor": 4, "data": 2}}},
            {},
            "the prefill pool's tensor parallelism must be at least the decode pool's",
        ),
        ({}, {"router": None}, "spec.disaggregation needs spec.router"),
        (
            {"decode": {"parallelism": {"tensor": 4, "data": 1}}},
            {},
            "each pool's parallelism.tensor x parallelism.data",
        ),
        ({"decode": {"engine": {"port": 9000}}}, {}, "a pool's engine.port must be spec.engine.port"),
        ({"kvPort": 20000}, {}, "spec.disaggregation.kvPort"),
        (
            {"prefill": {"parallelism": {"tensor": 6, "data": 2}}, "decode": {"parallelism": {"tensor": 4, "data": 3}}},
            {"npus": 12},
            "must be a multiple of the decode pool's",
        ),
        (
            {
                "kvPort": 30000,
                "prefill": {"parallelism": {"tensor": 8, "data": 2}},
                "decode": {"parallelism": {"tensor": 8, "data": 2}},
            },
            {"npus": 16},
            "must be at least 20000 + 1000 x spec.npus",
        ),
    ],
    ids=[
        "prefill-tp-below-decode",
        "no-router",
        "pool-npus",
        "pool-port",
        "kv-port-in-transfer-range",
        "prefill-tp-not-a-multiple",
        "kv-port-16-npus",
    ],
)
def test_kubectl_apply_refuses_a_pair_vllm_ascend_would_refuse(
    cluster: Cluster, namespace: str, crd: None, pd: dict[str, Any], spec: dict[str, Any], message: str
) -> None:
    body = split("bad", namespace, **pd)
    for key, value in spec.items():
        if value is None:
            body["spec"].pop(key)
        else:
            body["spec"][key] = value
    with pytest.raises(KubectlError) as err:
        cluster.apply(body, namespace=namespace)
    assert message in err.value.stderr


PROMPT_TOKENS = 4096


def _engine(pod: dict[str, Any]) -> str:
    return f"http://{pod['status']['podIP']}:8000"


def _kv(pods: list[dict[str, Any]] | dict[str, Any]) -> dict[str, int]:
    """The simulator's KV connector counts on an engine pod (aissim/kvtransfer.py)."""
    pod = pods[0] if isinstance(pods, list) else pods
    with urllib.request.urlopen(f"{_engine(pod)}/sim/state", timeout=10) as resp:
        kv: dict[str, int] = json.loads(resp.read())["kv_transfer"]
    return kv


def _prompt_tokens(pod: dict[str, Any]) -> dict[str, float]:
    return metric_values(f"{_engine(pod)}/metrics", "vllm:prompt_tokens_by_source_total", "source")


def _through_router(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """One completion through the service's router pod, once the router has found both roles."""
    items = cluster.get_json("pods", "-n", namespace, "-l", f"inference.ascend.dev/router={name}")["items"]
    (pod,) = [p for p in items if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")]
    body = {"model": MODEL, "prompt": f"{uuid.uuid4().hex} summarise", "sim_prompt_tokens": PROMPT_TOKENS,
            "max_tokens": 24, "ignore_eos": True}  # fmt: skip
    request = urllib.request.Request(
        f"http://{pod['status']['podIP']}:30000/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    answers: list[dict[str, Any]] = []

    def answered() -> bool:
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                answers.append(json.loads(resp.read()))
                return True
        except (urllib.error.URLError, OSError):  # the router not up yet, or no worker of a role found yet
            return False

    wait_for(answered, timeout=60, message="a completion through the P/D router")
    return answers[0]


def _role_ready(cluster: Cluster, namespace: str, name: str) -> bool:
    try:
        return condition(ais(cluster, namespace, name), "Ready") == ("True", "AllReplicasReady")
    except KubectlError:
        return False


def test_a_pair_comes_up_as_two_roles_and_the_parent_serves_when_both_do(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Any, router_bin: str
) -> None:
    label_nodes(cluster, add_nodes(3), namespace)
    attach()
    started = time.monotonic()
    cluster.apply(split("pd", namespace, decode={"replicas": 2}), namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "pd"), "Ready") == ("True", "AllRolesReady"),
        timeout=180,
        message="the parent Ready with both roles",
    )
    print(f"pair Ready {time.monotonic() - started:.1f} s after apply")
    assert _role_ready(cluster, namespace, "pd-prefill")
    assert _role_ready(cluster, namespace, "pd-decode")
    status = ais(cluster, namespace, "pd")["status"]
    assert [(r["role"], r["readyReplicas"]) for r in status["roles"]] == [("prefill", 1), ("decode", 2)]
    assert (status["readyReplicas"], status["desiredReplicas"]) == (1, 1)
    assert status["endpoint"] == f"http://pd-router.{namespace}.svc:30000"
    assert live_pods(cluster, namespace, "pd") == []  # the parent runs no engine of its own

    prefill = live_pods(cluster, namespace, "pd-prefill")
    assert len(prefill) == 1
    args = prefill[0]["spec"]["containers"][0]["args"]
    kv = json.loads(args[args.index("--kv-transfer-config") + 1])
    assert kv["kv_role"] == "kv_producer"
    assert kv["kv_connector"] == "MooncakeConnectorV1"
    decode = live_pods(cluster, namespace, "pd-decode")
    assert {p["spec"]["nodeName"] for p in decode}.isdisjoint({prefill[0]["spec"]["nodeName"]})  # 8 NPUs each
    policy = cluster.get_json("networkpolicy", "pd-decode", "-n", namespace)
    peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
    assert {"podSelector": {"matchLabels": {"inference.ascend.dev/router": "pd"}}} in peers
    router = cluster.get_json("deployment", "pd-router", "-n", namespace)
    router_args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in router_args
    assert router_args[router_args.index("--max-concurrent-requests") + 1] == str(2 * 32)

    # a request through the router is prefilled on the prefill pod, whose KV a decode pod pulls and decodes
    answer = _through_router(cluster, namespace, "pd")
    assert answer["usage"]["completion_tokens"] == 24
    assert _kv(prefill)["served"] == 1  # the KV it kept was pulled (canaries carry no kv_transfer_params)
    assert sum(_kv(p)["pulled"] for p in decode) == 1
    external = sum(_prompt_tokens(p).get("external_kv_transfer", 0.0) for p in decode)
    assert external == PROMPT_TOKENS  # the decode pod computed none of the prompt

    # a user's edit of a role is undone by the parent
    cluster.kubectl("patch", "ais", "pd-decode", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":5}}')
    wait_for(lambda: ais(cluster, namespace, "pd-decode")["spec"]["replicas"] == 2, timeout=30, message="undone")

    # kubectl scale on the parent reaches both roles, ratio kept
    cluster.kubectl("scale", "ais", "pd", "-n", namespace, "--replicas=0")

    def role_replicas() -> list[int]:
        return [ais(cluster, namespace, f"pd-{role}")["spec"]["replicas"] for role in ("prefill", "decode")]

    wait_for(
        lambda: role_replicas() == [0, 0],
        timeout=30,
        message="both roles scaled to 0",
    )

    # removing the split removes the roles
    cluster.kubectl(
        "patch", "ais", "pd", "-n", namespace, "--type=json",
        "-p", '[{"op":"remove","path":"/spec/disaggregation"}]',
    )  # fmt: skip
    wait_for(
        lambda: not [a for a in cluster.get_json("ais", "-n", namespace)["items"] if a["metadata"]["name"] != "pd"],
        timeout=60,
        message="the roles removed",
    )
    wait_for(lambda: ais(cluster, namespace, "pd")["status"].get("roles") is None, timeout=30, message="roles cleared")


def test_a_decode_engine_whose_kv_never_arrives_is_rolled_though_its_canary_still_answers(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Any
) -> None:
    """The transfer engine of one decode pod stops (`kv-transfer-hang` on it): every request that needs KV
    from the prefill engine waits there, while the operator's canary, which needs none, is still answered.
    Its progress alone would say healthy; its requests waiting for KV with no transfer completing stall it
    (health/stall.py `_transfer_stuck`), and the decode role's one disruption decision rolls it, not the
    other decode pod."""
    label_nodes(cluster, add_nodes(3), namespace)
    attach()
    body = split("pd", namespace, decode={"replicas": 2})
    body["spec"]["health"] = FAST
    cluster.apply(body, namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "pd"), "Ready") == ("True", "AllRolesReady"),
        timeout=180,
        message="the parent Ready with both roles",
    )
    (prefill,) = live_pods(cluster, namespace, "pd-prefill")
    hung, other = sorted(live_pods(cluster, namespace, "pd-decode"), key=lambda p: str(p["metadata"]["name"]))
    post(_engine(hung), "/sim/faults", {"fault": "kv-transfer-hang"})
    started = time.monotonic()
    params = _prefill_leg(_engine(prefill))
    waiting = threading.Thread(target=_decode_leg, args=(_engine(hung), params), daemon=True)
    waiting.start()

    def rolled() -> dict[str, Any] | None:
        roll: dict[str, Any] | None = ais(cluster, namespace, "pd-decode")["status"].get("lastRoll")
        return roll

    roll = wait_for(rolled, timeout=90, message="the decode pod rolled")
    print(f"[pd] kv-transfer-hang -> {roll['reason']} roll of {roll.get('pod')} {time.monotonic() - started:.1f}s")
    assert roll["reason"] == "Stalled"
    assert "waiting for their KV from a prefill engine" in roll["message"]
    uids = {p["metadata"]["uid"] for p in live_pods(cluster, namespace, "pd-decode")}
    assert hung["metadata"]["uid"] not in uids
    assert other["metadata"]["uid"] in uids  # the other decode pod serves on
    assert len(ais(cluster, namespace, "pd-decode")["status"]["rolls"]) == 1


def test_a_full_decode_engine_that_generates_is_never_rolled_while_a_kv_transfer_hang_still_is(
    cluster: Cluster, namespace: str, add_nodes: AddNodes, operator: Proc, attach: Any
) -> None:
    """At real engine speed (time scale 1): one decode pod gets more requests than its slots (maxNumSeqs 2, four
    requests whose KV arrives at once). vLLM 0.25.1 keeps the two without a slot in skipped_waiting, exported as
    `deferred`, though their KV has arrived (vllm/v1/core/sched/scheduler.py:640-663: the loop that promotes
    them breaks while running is at max_num_seqs; vllm/v1/metrics/loggers.py:1083-1085), and no transfer
    completes while the two running requests generate: three stall windows of that must not roll it. The other
    decode pod with `kv-transfer-hang` has a free slot and a request waiting for KV that never arrives: it is
    still rolled (health/stall.py `_transfer_stuck`), and only it."""
    label_nodes(cluster, add_nodes(3), namespace)
    attach(AIS_SIM_TIME_SCALE="1")
    body = split("pd", namespace)
    decode_engine = {**body["spec"]["engine"], "maxNumSeqs": 2}  # a pool's engine replaces spec.engine whole
    body["spec"]["disaggregation"] = {"decode": {"replicas": 2, "engine": decode_engine}}
    body["spec"]["health"] = FAST
    window = float(FAST["stall"]["windowSeconds"])
    cluster.apply(body, namespace=namespace)
    wait_for(
        lambda: condition(ais(cluster, namespace, "pd"), "Ready") == ("True", "AllRolesReady"),
        timeout=300,
        message="the parent Ready with both roles",
    )
    (prefill,) = live_pods(cluster, namespace, "pd-prefill")
    full, hung = sorted(live_pods(cluster, namespace, "pd-decode"), key=lambda p: str(p["metadata"]["name"]))
    legs = [_prefill_leg(_engine(prefill)) for _ in range(4)]
    # The four are allocated while no slot runs, as requests arriving together are (scheduler.py:640-663 runs the
    # loop while running < max_num_seqs): their pulls held until all four started, then their KV arrives at once.
    post(_engine(full), "/sim/faults", {"fault": "kv-transfer-hang"})
    for params in legs:  # ~100 tokens/s each at batch 2 (aissim's TP8 timings): a minute and more per request
        threading.Thread(target=_decode_leg, args=(_engine(full), params, 6000), daemon=True).start()
    wait_for(lambda: _kv(full)["pulls"] == 4, timeout=30, message="four pulls started on the full decode pod")
    urllib.request.urlopen(urllib.request.Request(f"{_engine(full)}/sim/faults", method="DELETE"), timeout=10)

    def gauge(name: str, label: str | None = None) -> dict[str, float]:
        return metric_values(f"{_engine(full)}/metrics", name, label)

    wait_for(lambda: _kv(full)["pulled"] == 4, timeout=30, message="the four requests' KV on the full decode pod")
    started = time.monotonic()
    generated = gauge("vllm:generation_tokens_total")[""]
    while time.monotonic() - started < 3 * window + 2:
        assert gauge("vllm:num_requests_running")[""] == 2
        assert gauge("vllm:num_requests_waiting_by_reason", "reason").get("deferred") == 2  # KV here, no slot
        assert ais(cluster, namespace, "pd-decode")["status"].get("lastRoll") is None
        time.sleep(1)
    assert gauge("vllm:generation_tokens_total")[""] > generated  # a full engine, generating
    assert {p["metadata"]["uid"] for p in live_pods(cluster, namespace, "pd-decode")} == {
        full["metadata"]["uid"],
        hung["metadata"]["uid"],
    }
    print(f"[pd] full decode pod: 2 running, 2 deferred with their KV, {time.monotonic() - started:.1f}s, no roll")

    post(_engine(hung), "/sim/faults", {"fault": "kv-transfer-hang"})
    hang_at = time.monotonic()
    threading.Thread(target=_decode_leg, args=(_engine(hung), _prefill_leg(_engine(prefill))), daemon=True).start()

    def rolled() -> dict[str, Any] | None:
        roll: dict[str, Any] | None = ais(cluster, namespace, "pd-decode")["status"].get("lastRoll")
        return roll

    roll = wait_for(rolled, timeout=90, message="the hung decode pod rolled")
    print(f"[pd] kv-transfer-hang at scale 1 -> {roll['reason']} roll {time.monotonic() - hang_at:.1f}s")
    assert roll["reason"] == "Stalled"
    assert "waiting for their KV from a prefill engine" in roll["message"]
    uids = {p["metadata"]["uid"] for p in live_pods(cluster, namespace, "pd-decode")}
    assert hung["metadata"]["uid"] not in uids
    assert full["metadata"]["uid"] in uids  # the full one generates on
    assert len(ais(cluster, namespace, "pd-decode")["status"]["rolls"]) == 1


def _prefill_leg(engine: str) -> dict[str, Any]:
    """The router's first leg, sent to the prefill engine itself: its answer's kv_transfer_params."""
    leg = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None, "remote_block_ids": None,
           "remote_host": None, "remote_port": None}  # fmt: skip
    body = {"model": MODEL, "prompt": f"{uuid.uuid4().hex} summarise", "sim_prompt_tokens": PROMPT_TOKENS,
            "max_tokens": 1, "kv_transfer_params": leg}  # fmt: skip
    request = urllib.request.Request(
        f"{engine}/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        params: dict[str, Any] = json.loads(resp.read())["kv_transfer_params"]
    return params


def _decode_leg(engine: str, params: dict[str, Any], max_tokens: int = 8) -> None:
    """The second leg, to a decode engine; it waits there until the pod goes (its error is expected)."""
    body = {"model": MODEL, "prompt": "x", "sim_prompt_tokens": PROMPT_TOKENS, "max_tokens": max_tokens,
            "ignore_eos": True, "kv_transfer_params": params}  # fmt: skip
    request = urllib.request.Request(
        f"{engine}/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            resp.read()
    except (urllib.error.URLError, OSError):
        pass
