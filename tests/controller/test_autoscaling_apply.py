"""controller/autoscaling.py against the fake API server: what a user sees of one decision. A queue that
lasted writes spec.replicas (the field the scale subresource writes) with an event and a status saying
why; an HPA on the same service is named and nothing is written; a Pending-for-NPUs replica is said in
the condition instead of another Pending pod; without spec.autoscaling nothing of it remains."""

from dataclasses import replace
from typing import Any

from ascend_operator.api.parse import parse_spec
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.autoscale import Signals
from ascend_operator.clients.resources import SERVICE_CR
from ascend_operator.controller.autoscaling import autoscale, other_autoscaler, signals
from ascend_operator.controller.deletions import Site
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.views import PodView
from ascend_operator.health.samples import EngineSample
from tests.fixtures.kube import FakeKube

AUTO = {"minReplicas": 1, "maxReplicas": 3, "scaleUpWindowSeconds": 10, "scaleDownWindowSeconds": 60}


def _spec(replicas: int = 1, autoscaling: dict[str, Any] | None = AUTO) -> AscendInferenceServiceSpec:
    body: dict[str, Any] = {
        "image": "img",
        "replicas": replicas,
        "model": {"path": "/models/m", "servedName": "m", "source": {"hostPath": {"path": "/models/m"}}},
        "engine": {"maxNumSeqs": 8},
    }
    if autoscaling is not None:
        body["autoscaling"] = autoscaling
    return parse_spec(body)


def _setup(replicas: int = 1) -> tuple[FakeKube, Site, list[tuple[str, str, str]]]:
    kube = FakeKube()
    kube.add({"apiVersion": "inference.ascend.dev/v1alpha1", "kind": SERVICE_CR.kind, "metadata": {"name": "llm"},
              "spec": {"replicas": replicas}})  # fmt: skip
    events: list[tuple[str, str, str]] = []
    site = Site(kube=kube, events=lambda *e: events.append(e), namespace="ns", service="llm", clock=lambda: 1.7e9)
    return kube, site, events


def _pod(name: str, *, pending_npus: bool = False) -> PodView:
    return PodView(
        name=name, uid=f"uid-{name}", replica=0, spec_hash="h", phase="Pending" if pending_npus else "Running",
        ready=not pending_npus, terminating=False, node=None, ip=None, created=None,
        unschedulable="0/4 nodes are available: 4 Insufficient huawei.com/Ascend910." if pending_npus else None,
    )  # fmt: skip


def _queue(replicas: int, waiting: float) -> Signals:
    return Signals(
        replicas=replicas, ready=replicas, answering=replicas, running=8.0 * replicas, waiting=waiting, slots=8
    )


async def test_a_lasting_queue_writes_spec_replicas_with_an_event_and_a_status() -> None:
    kube, site, events = _setup()
    memory, spec = ServiceMemory(), _spec()
    for t in (0.0, 5.0, 10.0):
        await autoscale(site, memory, spec, _queue(1, 6), now=t)
    assert kube.obj(SERVICE_CR.kind, "llm")["spec"]["replicas"] == 2  # type: ignore[index]
    assert [(e[0], e[1]) for e in events] == [("Normal", "ScaledUp")]
    assert "1 -> 2" in events[0][2]
    status = memory.live.autoscaling
    assert status is not None
    assert (status.desired_replicas, status.current_replicas, status.waiting_requests) == (2, 1, 6)
    assert status.last_scale_time == "2023-11-14T22:13:20Z"
    assert memory.autoscale_condition is not None
    assert memory.autoscale_condition.status == "True"
    # the next pass still reads spec.replicas 1 (the body has not caught up): not written, not told twice
    await autoscale(site, memory, spec, _queue(1, 6), now=15.0)
    assert len(kube.requests("patch", kind=SERVICE_CR.kind)) == 1
    assert len(events) == 1


async def test_an_hpa_on_the_service_is_named_and_not_fought() -> None:
    kube, site, events = _setup()
    kube.add(
        {"kind": "HorizontalPodAutoscaler", "metadata": {"name": "other"},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"}}},
        {"kind": "HorizontalPodAutoscaler", "metadata": {"name": "llm-hpa"},
         "spec": {"scaleTargetRef": {"apiVersion": "inference.ascend.dev/v1alpha1",
                                     "kind": "AscendInferenceService", "name": "llm"}}},
    )  # fmt: skip
    hpa = await other_autoscaler(site)
    assert hpa == "llm-hpa"
    memory, spec = ServiceMemory(), _spec()
    for t in (0.0, 5.0, 10.0, 15.0):
        s = _queue(1, 30)
        await autoscale(site, memory, spec, Signals(**{**s.__dict__, "other_autoscaler": hpa}), now=t)
    assert not kube.requests("patch", kind=SERVICE_CR.kind)
    assert memory.autoscale_condition is not None
    assert (memory.autoscale_condition.status, memory.autoscale_condition.reason) == ("False", "OtherAutoscaler")
    assert "llm-hpa" in memory.autoscale_condition.message
    assert [e[1] for e in events] == ["OtherAutoscaler"]  # once, when the hold starts


async def test_no_npus_for_another_replica_is_said_not_piled() -> None:
    kube, site, events = _setup(2)
    memory, spec = ServiceMemory(), _spec(2)
    views = [_pod("llm-0"), _pod("llm-1", pending_npus=True)]
    sample = EngineSample(t=0.0, running=8, waiting=30)
    for t in (0.0, 5.0, 10.0, 15.0):
        found = signals(spec, views=views, ready={"uid-llm-0"}, samples={"uid-llm-0": sample}, histories=[],
                        served={"uid-llm-0"}, now=t, wall=1.7e9, hpa=None)  # fmt: skip
        await autoscale(site, memory, spec, found, now=t)
    assert (found.ready, found.unplaceable, found.loading) == (1, 1, 0)
    assert not kube.requests("patch", kind=SERVICE_CR.kind)
    assert memory.autoscale_condition is not None
    assert (memory.autoscale_condition.status, memory.autoscale_condition.reason) == ("False", "NoCapacity")
    assert [e[1] for e in events] == ["NoCapacity"]


async def test_without_autoscaling_nothing_remains() -> None:
    _kube, site, _ = _setup()
    memory = ServiceMemory()
    await autoscale(site, memory, _spec(), _queue(1, 0), now=0.0)
    assert "autoscaling" in memory.live.model_fields_set
    await autoscale(site, memory, _spec(autoscaling=None), _queue(1, 0), now=5.0)
    assert "autoscaling" not in memory.live.model_fields_set  # not written: the stored decision stays
    assert memory.autoscale is None
    assert memory.autoscale_condition is None


async def test_a_spec_written_back_by_someone_is_written_again_once_the_body_had_time() -> None:
    kube, site, events = _setup()
    memory, spec = ServiceMemory(), _spec()
    for t in (0.0, 5.0, 10.0):
        await autoscale(site, memory, spec, _queue(1, 6), now=t)
    kube.add({"apiVersion": "inference.ascend.dev/v1alpha1", "kind": SERVICE_CR.kind, "metadata": {"name": "llm"},
              "spec": {"replicas": 1}})  # fmt: skip
    await autoscale(site, memory, spec, _queue(1, 6), now=20.0)  # 10 s after the write: the body may lag
    assert len(kube.requests("patch", kind=SERVICE_CR.kind)) == 1
    await autoscale(site, memory, spec, _queue(1, 6), now=30.0)  # 20 s: it was written back, write it again
    assert len(kube.requests("patch", kind=SERVICE_CR.kind)) == 2
    assert kube.obj(SERVICE_CR.kind, "llm")["spec"]["replicas"] == 2  # type: ignore[index]
    assert [e[1] for e in events] == ["ScaledUp", "ScaledUp"]


def test_loading_is_the_startup_grace_and_a_broken_replica_is_not_coming_capacity() -> None:
    spec = _spec(3)
    started = "2023-11-14T22:10:00Z"  # 200 s before wall = 1.7e9
    views = [_pod("llm-0"), replace(_pod("llm-1"), started_at=started), replace(_pod("llm-2"), started_at=started)]
    found = signals(spec, views=views, ready={"uid-llm-0"}, samples={}, histories=[], served={"uid-llm-2"}, now=0.0,
                    wall=1.7e9, hpa=None)  # fmt: skip
    # llm-1 loads (never Ready, inside the default grace); llm-2 served once and is not Ready now: broken
    assert (found.ready, found.loading) == (1, 1)
