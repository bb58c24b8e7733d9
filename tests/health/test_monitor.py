"""The health loop's I/O layer against the in-memory API server and scripted engines: a failed gate write
never ends a pass, canaries run beside the passes, and a pod that goes mid-pass is forgotten with its
canary."""

import asyncio
import datetime
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import kopf
import pytest
import yaml

from ascend_operator.api.constants import KIND, READINESS_GATE
from ascend_operator.api.health import HealthSpec
from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.clients.engine import CanaryResult
from ascend_operator.controller import engine_io
from ascend_operator.controller import monitor as monitor_module
from ascend_operator.controller.engine_io import Monitor, MonitorState
from ascend_operator.controller.laps import Laps
from ascend_operator.controller.monitor import health_pass
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.disruption import RollReason
from ascend_operator.health.judge import PodHealth, Verdict
from ascend_operator.health.machine import Action, Observations, RequestRoll, step
from tests.fixtures.examples import EXAMPLE
from tests.fixtures.kube import FakeKube

METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0"}} 0.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0"}} {gen}
"""


def pod(name: str, uid: str, ip: str, *, service: str = "a") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "uid": uid, "labels": {"inference.ascend.dev/service": service}},
        "status": {"phase": "Running", "podIP": ip, "startTime": "2026-01-01T00:00:00Z"},
    }


def cluster(*pods: dict[str, Any]) -> FakeKube:
    kube = FakeKube()
    kube.add(*pods)
    return kube


def gate_writes(kube: FakeKube) -> list[str]:
    """The pods whose readiness gate a pass tried to write, in order."""
    return [c.name for c in kube.requests("status", kind="Pod")]


def gates(kube: FakeKube) -> list[tuple[str, str, str]]:
    """The gate conditions written: (pod, status, reason)."""
    conditions = [(c.name, c.body["status"]["conditions"][0]) for c in kube.requests("status", kind="Pod")]
    return [(name, cond["status"], cond["reason"]) for name, cond in conditions]


class FakeEngines:
    def __init__(self, canary_seconds: float = 0.0) -> None:
        self.gen, self.canary_seconds, self.canaries = 0.0, canary_seconds, 0

    async def get_text(self, url: str, *, timeout: float) -> str | None:
        self.gen += 1
        return METRICS.format(gen=self.gen)

    async def get_json(self, url: str, *, timeout: float, api_key: str | None = None) -> Mapping[str, Any] | None:
        return None  # config check: no answer yet

    async def canary(self, base: str, **_: Any) -> CanaryResult:
        self.canaries += 1
        await asyncio.sleep(self.canary_seconds)
        return CanaryResult(ok=True, seconds=self.canary_seconds, tokens=4)


def monitor(kube: FakeKube, engines: FakeEngines, events: list[str]) -> Monitor:
    return Monitor(kube=kube, engines=engines, events=lambda t, r, m: events.append(r))


async def test_a_failed_gate_write_never_ends_the_pass(example: ParsedService) -> None:
    pods = [pod("a-0", "u0", "127.0.0.2"), pod("a-1", "u1", "127.0.0.3"), pod("a-2", "u2", "127.0.0.4")]
    kube = cluster(*pods)
    kube.fail("status", "Pod", None, name="a-0", times=2)  # 404: the pod was deleted mid-pass
    kube.fail("status", "Pod", lambda: kopf.TemporaryError("500 Internal Server Error"), name="a-1", times=2)
    state, memory, events = MonitorState(), ServiceMemory(), list[str]()
    mon = monitor(kube, FakeEngines(), events)
    try:
        for _ in range(2):
            await health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory)
        # every pass wrote every gate it could not write before: a-0 (404) and a-1 (500) are retried
        assert gate_writes(kube) == ["a-0", "a-1", "a-2", "a-0", "a-1"]
        assert state.pods["u0"].gate is None
        assert state.pods["u2"].gate is not None
    finally:
        await state.close()


async def test_canaries_run_beside_the_passes_and_die_with_their_pod(example: ParsedService) -> None:
    kube = cluster(pod("a-0", "u0", "127.0.0.2"))
    engines = FakeEngines(canary_seconds=30.0)  # longer than many passes: a canary queued at C64
    state, memory = MonitorState(), ServiceMemory()
    mon = monitor(kube, engines, [])
    try:
        await health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory)
        await asyncio.sleep(0)  # let the canary task start
        task = state.canaries["u0"]
        for _ in range(3):  # passes do not wait for it, and do not start a second one
            await asyncio.wait_for(
                health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory), 2.0
            )
        assert engines.canaries == 1
        assert not task.done()
        kube.remove("Pod", "a-0")  # the pod went
        await health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory)
        await asyncio.sleep(0)
        assert task.cancelled()
        assert not state.canaries
        assert not state.pods
    finally:
        await state.close()


async def test_a_draining_pod_stays_out_and_takes_no_canary(example: ParsedService) -> None:
    """Its requests must reach 0: the operator's own canary would be one more, and a passing canary must not
    put it back into the Service."""
    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    draining = pod("a-0", "u0", "127.0.0.2")
    draining["metadata"]["annotations"] = {
        "inference.ascend.dev/drain": json.dumps({"since": since, "reason": "SpecChanged", "message": ""})
    }
    kube = cluster(draining, pod("a-1", "u1", "127.0.0.3"))
    engines = FakeEngines()
    state, memory = MonitorState(), ServiceMemory()
    mon = monitor(kube, engines, [])
    try:
        for _ in range(2):
            await health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory)
            await asyncio.gather(*state.canaries.values())
        assert engines.canaries == 1  # a-1 only
        assert ("a-0", "False", "Draining") in gates(kube)
        assert all(g[2] == "Draining" for g in gates(kube) if g[0] == "a-0")
        assert memory.in_flight == {"u0": 0, "u1": 0}  # what the drain waits on, from the engine's gauges
    finally:
        await state.close()


class CountingEngines(FakeEngines):
    """Engines whose running and finished counts follow a script, one (running, finished) per scrape."""

    def __init__(self, script: list[tuple[int, int]]) -> None:
        super().__init__()
        self.script = script

    async def get_text(self, url: str, *, timeout: float) -> str | None:
        running, finished = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return (
            f'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{engine="0"}} {running}.0\n'
            f"# TYPE vllm:request_success_total counter\n"
            f'vllm:request_success_total{{engine="0",finished_reason="length"}} {finished}.0\n'
        )


async def test_requests_that_still_reach_a_draining_pod_hold_its_delete(example: ParsedService) -> None:
    """A drain whose engine is idle at a scrape long after its gate fell still waits when requests reached it
    between the last two scrapes (something still routes there: an endpoint list not yet updated, a client's
    old list): deleted then, its next request would be lost. Reached = finished + running grew; here 1 running,
    then 0 running and 3 finished: two arrived and finished between the scrapes, and the drain waits a settle
    time from then."""
    since = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    draining = pod("a-0", "u0", "127.0.0.2")
    draining["metadata"]["annotations"] = {
        "inference.ascend.dev/drain": json.dumps({"since": since, "reason": "SpecChanged", "message": ""})
    }
    kube = cluster(draining, {"kind": KIND, "metadata": {"name": "a"}, "status": {}})
    state, memory = MonitorState(), ServiceMemory()
    mon = monitor(kube, CountingEngines([(1, 0), (0, 3), (0, 3)]), [])
    spec = example.spec.model_copy(update={"replicas": 1})
    try:
        for _ in range(2):
            await health_pass(mon, spec=spec, namespace="ns", service="a", state=state, memory=memory)
        assert memory.in_flight == {"u0": 0}
        assert "u0" in memory.arrived, "the requests between the scrapes were counted"
        assert not kube.requests("delete", kind="Pod"), "deleted while requests still reached it"
        memory.arrived["u0"] = (memory.arrived["u0"][0] - 60, memory.arrived["u0"][1] - 60)  # a minute ago
        await health_pass(mon, spec=spec, namespace="ns", service="a", state=state, memory=memory)
        assert [c.name for c in kube.requests("delete", kind="Pod")] == ["a-0"], "quiet since: the drain ends"
    finally:
        await state.close()


class KeyedEngines(FakeEngines):
    """Engines that take one bearer key, as vLLM's --api-key / VLLM_API_KEY does; records the keys sent."""

    def __init__(self, accepted: str) -> None:
        super().__init__()
        self.accepted, self.sent = accepted, list[str | None]()

    async def canary(self, base: str, **kwargs: Any) -> CanaryResult:
        self.sent.append(kwargs.get("api_key"))
        if kwargs.get("api_key") != self.accepted:
            return CanaryResult(ok=False, seconds=0.0, tokens=0, error="HTTP 401, 0 tokens", status=401)
        return CanaryResult(ok=True, seconds=0.0, tokens=4, status=200)


async def test_canary_sends_the_key_and_falls_back_to_the_previous_one_after_a_rotation(
    example: ParsedService,
) -> None:
    from ascend_operator.api.parse import parse_spec
    from ascend_operator.clients.secrets import ApiKeyCache

    body = example.spec.model_dump(by_alias=True, exclude_none=True)
    spec = parse_spec({**body, "auth": {"apiKeySecretRef": {"name": "k", "key": "token"}}})
    secret = {"value": "old"}

    async def read(namespace: str, name: str, key: str) -> tuple[str, str] | None:
        return secret["value"], secret["value"]

    clock = [1000.0]
    engines = KeyedEngines(accepted="old")  # the engine started before the rotation
    keys = ApiKeyCache(read=read, ttl=0.0)
    state, memory, events = MonitorState(), ServiceMemory(), list[str]()
    mon = Monitor(
        kube=cluster(pod("a-0", "u0", "127.0.0.2")),
        engines=engines,
        events=lambda t, r, m: events.append(r),
        keys=keys,
        mono=lambda: clock[0],
    )

    async def canary_once() -> None:
        clock[0] += 2 * spec.health.canary.period_seconds  # the last canary is a period old: one is due
        await health_pass(mon, spec=spec, namespace="ns", service="a", state=state, memory=memory)
        await asyncio.gather(*state.canaries.values())

    try:
        await canary_once()
        assert engines.sent == ["old"]
        secret["value"] = "new"
        await canary_once()
        assert engines.sent == ["old", "new", "old"]  # refused with the new key, taken with the previous
        assert not events  # nothing to report: the engine answers, the key was readable
    finally:
        await state.close()


@pytest.fixture
def example() -> ParsedService:
    return parse_resource(yaml.safe_load(EXAMPLE.read_text()))


async def test_a_failed_worker_makes_its_leader_worker_gone_and_the_status_names_it() -> None:
    """The monitor hands a group leader its workers' pods: a worker that failed (a node lost, a force delete
    LWS does not see) is named on the leader's verdict and in the service's faults, not hidden behind a
    leader whose own engine still answers."""
    body = yaml.safe_load((EXAMPLE.parent / "dsr1-2node.yaml").read_text())
    parsed = parse_resource(body)
    assert parsed.spec.parallelism.nodes == 2

    def member(name: str, uid: str, index: int, phase: str, ip: str | None) -> dict[str, Any]:
        raw = pod(name, uid, ip or "", service="svc")
        raw["metadata"]["labels"] |= {
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "leaderworkerset.sigs.k8s.io/worker-index": str(index),
        }
        raw["status"]["phase"] = phase
        if ip is None:
            del raw["status"]["podIP"]
        return raw

    leader = member("svc-group-0", "lead", 0, "Running", "127.0.0.2")
    worker = member("svc-group-0-1", "work", 1, "Failed", None)
    state, memory = MonitorState(), ServiceMemory()
    mon = monitor(cluster(leader, worker), FakeEngines(), [])
    try:
        await health_pass(mon, spec=parsed.spec, namespace="ns", service="svc", state=state, memory=memory)
        reason, message = memory.pod_faults["lead"]
        assert reason == "WorkerGone"
        assert "svc-group-0-1" in message
        assert set(memory.pod_faults) == {"lead"}  # the worker is judged through its leader, never alone
    finally:
        await state.close()


class ScriptedEngines(FakeEngines):
    """One canary answer, an engine whose counters advance (or not) between scrapes; counts the scrapes."""

    def __init__(self, *, ok: bool, advancing: bool) -> None:
        super().__init__()
        self.ok, self.advancing, self.scrapes = ok, advancing, 0

    async def get_text(self, url: str, *, timeout: float) -> str | None:
        self.scrapes += 1
        self.gen += 1 if self.advancing else 0
        # as prometheus-client exposes a counter (vLLM's): TYPE named by its _total sample
        return f'# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{engine="0"}} {self.gen}\n'

    async def canary(self, base: str, **_: Any) -> CanaryResult:
        tokens = 4 if self.ok else 0
        return CanaryResult(ok=self.ok, seconds=0.0, tokens=tokens, error="" if self.ok else "TimeoutError")


@pytest.mark.parametrize(
    ("ok", "advancing", "scrapes", "queued"),
    [
        (True, True, 1, False),  # tokens: the bracket is never read, so no second scrape and nothing parsed
        (False, True, 2, True),  # no tokens but the engine advanced meanwhile: busy, not failing
        (False, False, 2, False),  # no tokens and nothing moved: a failure
    ],
)
async def test_a_canary_is_judged_by_its_own_scrapes_only_when_it_returned_no_tokens(
    example: ParsedService, ok: bool, advancing: bool, scrapes: int, queued: bool
) -> None:
    from ascend_operator.controller.engine_io import run_canary
    from ascend_operator.controller.views import pod_view

    engines = ScriptedEngines(ok=ok, advancing=advancing)
    mon = monitor(cluster(), engines, [])
    outcome = await run_canary(mon, example.spec, pod_view(pod("a-0", "u0", "127.0.0.2")))
    assert (outcome.ok, outcome.queued, engines.scrapes) == (ok, queued, scrapes)
    assert (outcome.before is None, outcome.after is None) == (ok, ok)


@pytest.mark.parametrize(
    ("asks", "verdict_roll"),
    [
        (True, None),  # the machine asks while its verdict carries no roll: the request is what counts
        (False, RollReason.STALLED),  # a verdict's roll the machine did not turn into an action: no deletion
        (False, None),
        (True, RollReason.STALLED),
    ],
)
async def test_a_pod_is_rolled_exactly_when_its_machine_asks(
    example: ParsedService, monkeypatch: pytest.MonkeyPatch, asks: bool, verdict_roll: RollReason | None
) -> None:
    def scripted(
        state: PodHealth, obs: Observations, *, now: float, cfg: HealthSpec, decode_slots: int | None
    ) -> tuple[PodHealth, Verdict, tuple[Action, ...]]:
        state, verdict, actions = step(state, obs, now=now, cfg=cfg, decode_slots=decode_slots)
        kept = tuple(a for a in actions if not isinstance(a, RequestRoll))
        ask = (RequestRoll(reason=RollReason.STALLED, message="asked by the machine"),) if asks else ()
        return state, replace(verdict, roll=verdict_roll), kept + ask

    monkeypatch.setattr(monitor_module, "step", scripted)
    kube = cluster(pod("a-0", "u0", "127.0.0.2"), {"kind": KIND, "metadata": {"name": "a"}, "status": {}})
    state, memory, events = MonitorState(), ServiceMemory(), list[str]()
    try:
        await health_pass(
            monitor(kube, FakeEngines(), events),
            spec=example.spec,
            namespace="ns",
            service="a",
            state=state,
            memory=memory,
        )
        assert [c.name for c in kube.requests("delete")] == (["a-0"] if asks else [])
        service = kube.obj(KIND, "a")
        assert service is not None
        rolls = service["status"].get("rolls", [])
        assert [r["message"] for r in rolls] == (["asked by the machine"] if asks else [])
    finally:
        await state.close()


async def test_a_failed_scrape_is_logged_with_its_pod_and_time_and_counted(
    example: ParsedService, caplog: pytest.LogCaptureFixture
) -> None:
    class Silent(FakeEngines):
        async def get_text(self, url: str, *, timeout: float) -> str | None:
            clock[0] += timeout  # it took the whole timeout
            return None

    clock = [100.0]
    state, memory = MonitorState(laps=Laps(clock=lambda: clock[0])), ServiceMemory()
    kube = cluster(pod("a-0", "u0", "127.0.0.2"))
    mon = Monitor(kube=kube, engines=Silent(), events=lambda t, r, m: None, mono=lambda: clock[0])
    caplog.set_level(logging.DEBUG, logger=engine_io.__name__)
    try:
        for _ in range(2):
            await health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory)
        failed = [r.getMessage() for r in caplog.records if "scrape of pod a-0" in r.getMessage()]
        timeout = example.spec.health.scrape_timeout_seconds
        assert failed == [
            f"scrape of pod a-0 failed after {timeout:.2f}s (timeout {timeout:.1f}s): no answer (refused, error "
            f"status or timeout) ({n} failed scrape(s) of this pod)"
            for n in (1, 2)
        ]
        assert state.scrape_failures == {"u0": 2}
        assert state.laps.summary() == f"scrape {timeout:.1f}s"  # what a slow pass's log line gives as its cause
        kube.remove("Pod", "a-0")
        await health_pass(mon, spec=example.spec, namespace="ns", service="a", state=state, memory=memory)
        assert state.scrape_failures == {}  # a gone pod's count goes with it
    finally:
        await state.close()


async def test_an_engine_restarted_by_the_kubelet_is_announced_and_taken_out_not_rolled(
    example: ParsedService,
) -> None:
    """The kubelet restarted the engine container between two passes (it exited; the pod and its IP stay):
    one EngineRestarted event, the gate goes False until the new process passes again, no deletion."""
    running = pod("a-0", "u0", "127.0.0.2")
    running["status"]["containerStatuses"] = [{"name": "engine", "restartCount": 0, "state": {"running": {}}}]
    kube = cluster(running)
    state, memory, events = MonitorState(), ServiceMemory(), list[str]()
    mon = monitor(kube, FakeEngines(), events)
    spec = example.spec.model_copy(update={"health": HealthSpec(startup_grace_seconds=0)})
    try:
        await health_pass(mon, spec=spec, namespace="ns", service="a", state=state, memory=memory)
        state.pods["u0"] = replace(state.pods["u0"], gate=(True, "CanaryPassing"), mismatches=(), served=True)
        stored = kube.obj("Pod", "a-0")
        assert stored is not None
        stored["status"]["containerStatuses"][0].update(
            restartCount=1, lastState={"terminated": {"reason": "Error", "exitCode": 1}}
        )
        for _ in range(2):  # the event once, not per pass
            await health_pass(mon, spec=spec, namespace="ns", service="a", state=state, memory=memory)
        assert events.count("EngineRestarted") == 1
        assert gates(kube)[-1][:2] == ("a-0", "False")
        assert not kube.requests("delete", kind="Pod")
    finally:
        await state.close()


@pytest.mark.parametrize(
    ("engine_started", "restarted_unseen"),
    [("2026-01-01T00:10:00Z", True), ("2026-01-01T00:01:00Z", False)],
    ids=["its engine restarted after the gate was written", "its gate was written after the restart"],
)
async def test_an_operator_that_starts_after_an_unseen_restart_takes_the_gate_down(
    example: ParsedService, engine_started: str, restarted_unseen: bool
) -> None:
    """The engine restarted while no operator watched (the one before was killed): the pod's gate, True since
    00:05, vouches for the run before the restart. The new process takes it down until the new run passes,
    with the event; a gate written after the restart (the old operator saw it and re-judged) is kept."""
    running = pod("a-0", "u0", "127.0.0.2")
    running["status"]["containerStatuses"] = [
        {"name": "engine", "restartCount": 1, "state": {"running": {"startedAt": engine_started}}}
    ]
    gate = {"type": READINESS_GATE, "status": "True", "reason": "CanaryPassing"}
    running["status"]["conditions"] = [{**gate, "lastTransitionTime": "2026-01-01T00:05:00Z"}]
    kube = cluster(running)
    state, memory, events = MonitorState(), ServiceMemory(), list[str]()
    spec = example.spec.model_copy(update={"health": HealthSpec(startup_grace_seconds=0)})
    try:
        await health_pass(
            monitor(kube, FakeEngines(), events), spec=spec, namespace="ns", service="a", state=state, memory=memory
        )
        assert (events.count("EngineRestarted") == 1) is restarted_unseen
        assert (gates(kube)[-1:] == [("a-0", "False", "CheckingConfig")]) is restarted_unseen, gates(kube)
        assert not restarted_unseen or state.pods["u0"].served  # it served: its startup grace is not back
    finally:
        await state.close()


async def test_a_restarted_operator_does_not_put_a_loaded_engine_whose_gate_is_down_back_into_its_grace(
    example: ParsedService,
) -> None:
    """The engine's gate is False (an earlier operator found it stalled), and the kubelet says its startup
    probe passed: it has served, so a roll is not held back by the startup grace (seed 41 of the soak: a hung
    pod was rolled 548 s late after an operator restart, when its 600 s grace ran out). Without `started`,
    the gate alone decides, as before."""
    for started, served in ((True, True), (False, False)):
        running = pod("a-0", "u0", "127.0.0.2")
        running["status"]["containerStatuses"] = [
            {"name": "engine", "restartCount": 0, "started": started, "state": {"running": {}}}
        ]
        gate = {"type": READINESS_GATE, "status": "False", "reason": "Stalled"}
        running["status"]["conditions"] = [{**gate, "lastTransitionTime": "2026-01-01T00:05:00Z"}]
        state, memory = MonitorState(), ServiceMemory()
        try:
            await health_pass(
                monitor(cluster(running), FakeEngines(), []),
                spec=example.spec,
                namespace="ns",
                service="a",
                state=state,
                memory=memory,
            )
            assert state.pods["u0"].served is served
            assert ("u0" in memory.served) is served  # what the disruption step's startup-grace rule reads
        finally:
            await state.close()
