"""Revisions and a judged rollout through the real reconcile pass against the in-memory API server: a spec
change with spec.rollout.analysis replaces one replica first, from the updated revision; the other waits
on the previous one; a failed verdict puts the judged pod back on the previous revision (spec untouched)
and holds; a passed one lets the rest follow and the updated revision becomes the current one. The
verdict itself is the health loop's (tests/rollout_analysis/test_rollout_analysis.py, controller/analysis.py)."""

import copy
from typing import Any

from ascend_operator.api.constants import KIND, LABEL_REVISION
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.rollout_memory import Concluded
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.rollout_analysis import AnalysisVerdict, Outcome
from tests.fixtures.kube import FakeKube

NS = "llm"


class Service:
    """One service as kopf would hand it to the passes: its body with the last status written."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = copy.deepcopy(body)
        self.body["metadata"].update(namespace=NS, uid="svc-uid", generation=1)
        spec = self.body["spec"]
        spec["replicas"] = 2
        spec["rollout"] = {"drainSeconds": 0, "analysis": {"seconds": 30}}
        self.kube = FakeKube()
        self.kube.add({"kind": KIND, "metadata": {"name": "dsv4-flash"}}, namespace=NS)
        self.events: list[tuple[str, str, str]] = []
        self.ctx = Context(kube=self.kube, events=lambda *e: self.events.append(e), now=lambda: "2026-12-05T02:00:00Z")
        self.memory = ServiceMemory()

    async def step(self) -> dict[str, Any]:
        """A pass, then the kubelet: terminating pods go, the others are Running and Ready."""
        status = await reconcile(self.body, self.ctx, self.memory)
        self.body["status"] = status
        self.kube.finish_terminating()
        for pod in self.kube.of_kind("Pod", NS):
            pod["status"] = {
                "phase": "Running",
                "podIP": "127.0.0.2",
                "startTime": "2026-12-05T01:00:00Z",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        return status

    def change(self, name: str, value: str) -> None:
        self.body["spec"]["env"] = [{"name": name, "value": value}]
        self.body["metadata"]["generation"] += 1

    def revisions(self) -> dict[str, str]:
        """Pod name -> the revision label it carries."""
        return {p["metadata"]["name"]: p["metadata"]["labels"][LABEL_REVISION] for p in self.kube.of_kind("Pod", NS)}

    def verdict(self, outcome: Outcome, **found: Any) -> None:
        update = self.body["status"]["updateRevision"].rsplit("-", 1)[-1]
        v = AnalysisVerdict(outcome=outcome, **found)
        self.memory.rollout.concluded = Concluded(
            revision=update, verdict=v, compared_with="replicas", canary="dsv4-flash-0"
        )


async def settle(svc: Service, passes: int = 6) -> dict[str, Any]:
    status: dict[str, Any] = {}
    for _ in range(passes):
        status = await svc.step()
    return status


async def test_a_failed_verdict_puts_the_judged_pod_back_and_holds(example_body: dict[str, Any]) -> None:
    svc = Service(example_body)
    status = await settle(svc)
    first = status["currentRevision"]
    assert status["updateRevision"] == first
    (r1,) = set(svc.revisions().values())
    assert [c["metadata"]["name"] for c in svc.kube.of_kind("ControllerRevision", NS)] == [first]

    svc.change("NEW_KNOB", "1")
    status = await settle(svc)
    on = svc.revisions()
    assert status["rollout"]["phase"] == "Analyzing"
    assert sorted(on.values()) == sorted([r1, status["updateRevision"].rsplit("-", 1)[-1]]), on
    assert on["dsv4-flash-1"] == r1, "the other replica waits on the previous revision while one is judged"
    assert {c["revision"]: c["replicas"] for c in status["revisions"]} == {first: 1, status["updateRevision"]: 1}

    svc.verdict(Outcome.FAILED, signal="TTFT", message="TTFT p90 4.000 s against 0.300 s", canary=4.0, baseline=0.3)
    status = await settle(svc)
    assert set(svc.revisions().values()) == {r1}, "back on the previous revision"
    assert svc.body["spec"]["env"] == [{"name": "NEW_KNOB", "value": "1"}], "the spec stays as written"
    rollout = status["rollout"]
    assert (rollout["phase"], rollout["signal"], rollout["canaryValue"], rollout["baselineValue"]) == (
        "RolledBack",
        "TTFT",
        4.0,
        0.3,
    )
    assert status["currentRevision"] == first
    assert status["updatedReplicas"] == 2, "the pods run what they should: settled, not a rollout stuck"
    healthy = next(c for c in status["conditions"] if c["type"] == "RolloutHealthy")
    assert (healthy["status"], healthy["reason"]) == ("False", "RolledBack")
    assert any(e[1] == "RolledBack" and "TTFT p90" in e[2] for e in svc.events)
    stored = svc.kube.obj(KIND, "dsv4-flash", NS)
    assert stored is not None
    rolls = [r["reason"] for r in stored["status"]["rolls"]]  # written by the disruption step itself
    assert rolls == ["SpecChanged", "RolledBack"], rolls
    deleted = [c.name for c in svc.kube.requests("delete", kind="Pod")]
    assert "dsv4-flash-1" not in deleted, "only the judged replica ever ran the change"

    held = await settle(svc, 3)
    assert held["rollout"]["phase"] == "RolledBack"
    assert len(svc.kube.requests("delete", kind="Pod")) == len(deleted), "nothing more until the spec changes"

    svc.change("NEW_KNOB", "2")  # a new change is judged again
    status = await settle(svc)
    assert status["rollout"]["phase"] == "Analyzing"
    assert len(svc.kube.of_kind("ControllerRevision", NS)) == 3


async def test_a_passed_verdict_lets_the_rest_follow_and_completes(example_body: dict[str, Any]) -> None:
    svc = Service(example_body)
    first = (await settle(svc))["currentRevision"]
    svc.change("NEUTRAL", "1")
    status = await settle(svc)
    assert status["rollout"]["phase"] == "Analyzing"
    svc.verdict(Outcome.PASSED, message="within every threshold")
    status = await settle(svc, 10)
    update = status["updateRevision"]
    assert update != first
    assert status["currentRevision"] == update
    assert status["rollout"]["phase"] == "Complete"
    assert set(svc.revisions().values()) == {update.rsplit("-", 1)[-1]}
    assert any(e[1] == "RolloutComplete" for e in svc.events)


async def test_without_analysis_every_replica_follows_at_once(example_body: dict[str, Any]) -> None:
    svc = Service(example_body)
    svc.body["spec"]["rollout"] = {"drainSeconds": 0}
    await settle(svc)
    svc.change("NEUTRAL", "1")
    status = await settle(svc, 8)
    assert status["rollout"]["phase"] == "Complete"
    assert status["currentRevision"] == status["updateRevision"]


async def test_history_is_bounded(example_body: dict[str, Any]) -> None:
    svc = Service(example_body)
    svc.body["spec"]["rollout"] = {"drainSeconds": 0, "revisionHistoryLimit": 2}
    await settle(svc)
    for i in range(5):
        svc.change("STEP", str(i))
        await settle(svc, 8)
    kept = svc.kube.of_kind("ControllerRevision", NS)
    # the limit besides the current and the updated one, kept when the newest was made: the oldest went
    assert sorted(int(k["revision"]) for k in kept) == [3, 4, 5, 6]


async def test_a_judged_pod_that_goes_before_its_verdict_is_a_failed_analysis(example_body: dict[str, Any]) -> None:
    """A stall roll, a crash or a delete by hand: its successor runs the current revision, no second pod
    ever runs the judged one."""
    svc = Service(example_body)
    (r1,) = set((await settle(svc)) and svc.revisions().values())
    svc.change("NEW_KNOB", "1")
    status = await settle(svc)
    assert status["rollout"]["canary"] == "dsv4-flash-0"
    svc.kube.remove("Pod", "dsv4-flash-0", namespace=NS)
    status = await settle(svc)
    assert (status["rollout"]["phase"], status["rollout"]["signal"]) == ("RolledBack", "CanaryGone")
    assert set(svc.revisions().values()) == {r1}
    created = svc.kube.requests("create", kind="Pod")
    assert len(created) == 4, "two at the start, the judged one, its successor on the current revision"


async def test_a_new_services_pods_wait_for_no_revision_call(example_body: dict[str, Any]) -> None:
    """The revision is recorded after the pods: a new service's pod create is not one API call later."""
    svc = Service(example_body)
    await svc.step()
    calls = [(c.verb, c.kind) for c in svc.kube.requests("create", "list")]
    first_revision_call = next(i for i, (_, kind) in enumerate(calls) if kind == "ControllerRevision")
    assert first_revision_call > calls.index(("create", "Pod")), calls
    made = len(svc.kube.requests(kind="ControllerRevision"))
    await settle(svc, 3)
    assert len(svc.kube.requests(kind="ControllerRevision")) == made, "a steady service makes no revision call"
