"""A P/D split's autoscaling through the controller, against the fake API server (issue 40 item 2): a pool
decides on its own side's signals and publishes its decision at once in its own status, writing no
spec.replicas; the parent reads both pools' decisions, writes each role's engines within the ratio (the pool
short of it pulled up), says which pool moved and why in an event, and lists both decisions in its status."""

from __future__ import annotations

import copy
from typing import Any

from ascend_operator.api.autoscaling import AutoscalingStatus
from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.parse import parse_spec
from ascend_operator.autoscale import Signals
from ascend_operator.controller.autoscaling import autoscale
from ascend_operator.controller.deletions import Site
from ascend_operator.controller.engine_io import MonitorState
from ascend_operator.controller.monitor import _share
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.health.samples import EngineSample
from ascend_operator.render.disaggregation import role_spec
from tests.fixtures.kube import FakeKube

ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
KIND = "AscendInferenceService"
AUTO = {
    "minReplicas": 1,
    "maxReplicas": 4,
    "scaleUpWindowSeconds": 10,
    "scaleDownWindowSeconds": 60,
    "pd": {"decodePerPrefill": {"atLeast": 0.5, "atMost": 2}},
}


def _parent(example_body: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(example_body)
    out["metadata"].update({"namespace": "llm", "uid": "ais-uid", "generation": 1})
    out["spec"].update(router=ROUTER, replicas=1, disaggregation={}, autoscaling=AUTO)
    return out


async def test_a_prefill_pool_publishes_its_decision_and_writes_no_replicas(example_body: dict[str, Any]) -> None:
    spec = role_spec(parse_spec(_parent(example_body)["spec"]), PdRole.PREFILL, group="dsv4-flash")
    assert spec.autoscaling is not None
    assert spec.autoscaling.max_replicas == 4
    kube = FakeKube()
    kube.add({"apiVersion": "inference.ascend.dev/v1alpha1", "kind": KIND, "metadata": {"name": "dsv4-flash-prefill"},
              "spec": {"replicas": 1}})  # fmt: skip
    events: list[tuple[str, str, str]] = []
    site = Site(kube=kube, events=lambda *e: events.append(e), namespace="ns", service="dsv4-flash-prefill",
                clock=lambda: 1.7e9)  # fmt: skip
    memory = ServiceMemory()
    # twelve 8K prompts queued on the one prefill engine, its single running request a one-token leg
    queue = Signals(replicas=1, ready=1, answering=1, running=1, waiting=12, slots=32, role="prefill",
                    prompt_backlog=12 * 8192, kv_usage=0.1)  # fmt: skip
    for t in (0.0, 5.0, 10.0, 15.0):
        await autoscale(site, memory, spec, queue, now=t)
    role = kube.obj(KIND, "dsv4-flash-prefill")
    assert role is not None
    assert role["spec"]["replicas"] == 1  # the parent writes it
    assert kube.requests("patch", kind=KIND) == []
    asked = [c.body["status"]["autoscaling"]["desiredReplicas"] for c in kube.requests("status", kind=KIND)]
    assert asked == [1, 4]  # each decision once, when it changed (the first: hold), not at every pass
    published = AutoscalingStatus.model_validate(role["status"]["autoscaling"])
    assert (published.desired_replicas, published.reason.value) == (4, "ScaledUp")
    assert published.queued_prompt_tokens == 12 * 8192
    assert "prompt tokens queued" in published.message
    assert events == []  # the parent announces the move it makes


async def test_the_parent_writes_both_pools_within_the_ratio_and_shows_both_decisions(
    example_body: dict[str, Any],
) -> None:
    kube, events = FakeKube(), list[tuple[str, str, str]]()
    ctx = Context(kube=kube, events=lambda *e: events.append(e), now=lambda: "2026-12-01T00:00:00Z")
    parent = _parent(example_body)
    await reconcile(parent, ctx, ServiceMemory())
    decode = kube.obj(KIND, "dsv4-flash-decode", "llm")
    assert decode is not None
    assert decode["spec"]["autoscaling"]["maxReplicas"] == 4
    # the decode pool's own decision: 4 engines (its slots full); prefill asks nothing
    decode["status"] = {"autoscaling": {"desiredReplicas": 4, "currentReplicas": 1, "reason": "ScaledUp",
                                        "message": "1 -> 4: queue: 60 running+waiting over 32 slots"}}  # fmt: skip
    await reconcile(parent, ctx, ServiceMemory())
    counts = {r: kube.obj(KIND, f"dsv4-flash-{r}", "llm")["spec"]["replicas"] for r in ("prefill", "decode")}  # type: ignore[index]
    assert counts == {"prefill": 2, "decode": 4}  # at most 2 decode per prefill: prefill pulled up
    said = sorted(m for _, reason, m in events if reason == "ScaledUp")
    assert said[0].startswith("decode 1 -> 4: 1 -> 4: queue")
    assert said[1].startswith("prefill 1 -> 2: prefill asks 1, gets 2")
    # the next pass reads the roles as written: both decisions in the parent's status
    status = await reconcile(parent, ctx, ServiceMemory())
    roles = {r["role"]: r for r in status["roles"]}
    assert roles["decode"]["desiredReplicas"] == 4
    assert roles["decode"]["autoscaling"]["reason"] == "ScaledUp"
    assert roles["prefill"]["desiredReplicas"] == 2
    router = kube.obj("Deployment", "dsv4-flash-router", "llm")
    assert router is not None
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--max-concurrent-requests") + 1] == str(4 * 32)  # the decode pool's most: no restart


def test_a_prefill_engine_holding_kv_for_a_pull_is_not_drained_yet() -> None:
    """A prefill pool's scale-down drains an engine: its requests last one token, so running + waiting reach 0
    while the decode engines have yet to pull their KV, which vLLM keeps in use until then
    (scheduler.py `_free_request`, the connector's delay). Deleting it then would fail those requests on the
    decode side (the e2e test saw HTTP 500s). KV in use on a prefill engine counts as in flight; on a decode
    engine, or once pulled, it does not."""
    idle_holding = EngineSample(t=0.0, running=0, waiting=0, kv_usage=0.3)
    pulled = EngineSample(t=0.0, running=0, waiting=0, kv_usage=0.0)
    seen = {}
    for holds_kv in (True, False):
        memory = ServiceMemory()
        _share(memory, MonitorState(), {"a": idle_holding, "b": pulled, "c": None}, scraped_at=1.0, holds_kv=holds_kv)
        seen[holds_kv] = memory.in_flight
    assert seen[True] == {"a": 1, "b": 0, "c": None}
    assert seen[False] == {"a": 0, "b": 0, "c": None}
