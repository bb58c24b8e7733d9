"""`aisctl render` prints what the operator creates: every example, reconciled into the test double of the API
server by the operator's own pass, leaves exactly the objects render printed (kinds, names, engine and router
arguments), the role services of a P/D split reconciled in turn as the operator's handler does.

Why here as well as on a cluster (tests/e2e/test_render_matches.py): this runs in a second for every example
and fails first; the cluster test adds what only a real API server and scheduler show.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kopf._cogs.aiokits.aioenums import FlagSetter
from kopf._core.intents.stoppers import DaemonStoppingReason

from ascend_operator.api.constants import KIND
from ascend_operator.api.parse import parse_resource
from ascend_operator.clients.resources import SERVICE_CR, Resource
from ascend_operator.controller import handlers
from ascend_operator.controller.laps import Laps
from ascend_operator.controller.reconcile import Context, reconcile
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.steps import STEPS
from ascend_operator.render.desired import Desired
from ascend_operator.render.pod import Owner
from tests.fixtures.examples import EXAMPLE
from tests.fixtures.kube import FakeKube

EXAMPLES = sorted(p for p in EXAMPLE.parent.glob("*.yaml") if f"\nkind: {KIND}\n" in p.read_text())
NAMESPACE = "llm"
#: What a pass reads but never makes: the service itself (a role service is compared: the parent makes it).
#: Not rendered from a spec: events, and the ControllerRevisions recording which specs ran (controller/revisions.py).
NOT_MADE = {"Event", "ControllerRevision"}


def load(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    return body


def render(path: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "ascend_operator.cli.main", "render", "-f", str(path), "-n", NAMESPACE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


async def reconciled(body: dict[str, Any]) -> FakeKube:
    """The example applied and reconciled until no pass creates anything more (each service by its own pass,
    as the operator's handler runs one per AscendInferenceService, role services included)."""
    kube = FakeKube()
    kube.add({**body, "metadata": {**body["metadata"], "generation": 1}}, namespace=NAMESPACE)
    ctx = Context(kube=kube, events=lambda *e: None, now=lambda: "2026-12-01T00:00:00Z")
    memories: dict[str, ServiceMemory] = {}
    for _ in range(4):
        before = set(kube.objects)
        for service in kube.of_kind(KIND, NAMESPACE):
            name = service["metadata"]["name"]
            service["metadata"].setdefault("generation", 1)
            await reconcile(service, ctx, memories.setdefault(name, ServiceMemory()))
        if set(kube.objects) == before:
            return kube
    raise AssertionError(f"{body['metadata']['name']}: passes kept creating objects")


def container_args(obj: dict[str, Any]) -> list[list[str]]:
    """The containers' commands and arguments of a pod, a Deployment or a LeaderWorkerSet."""
    spec = obj.get("spec") or {}
    templates = [spec]
    if "template" in spec:
        templates = [spec["template"]["spec"]]
    elif "leaderWorkerTemplate" in spec:
        lwt = spec["leaderWorkerTemplate"]
        templates = [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    return [[*c.get("command", []), *c.get("args", [])] for t in templates for c in t.get("containers", [])]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
async def test_the_operator_creates_exactly_what_render_prints(path: Path) -> None:
    printed = render(path)
    body = load(path)
    kube = await reconciled(body)
    parent = body["metadata"]["name"]
    made = {
        (kind, name): obj
        for (kind, ns, name), obj in kube.objects.items()
        if ns == NAMESPACE and kind not in NOT_MADE and (kind, name) != (KIND, parent)
    }
    assert sorted(made) == sorted((o["kind"], o["metadata"]["name"]) for o in printed)
    for obj in printed:
        live = made[(obj["kind"], obj["metadata"]["name"])]
        what = f"{obj['kind']} {obj['metadata']['name']}"
        assert container_args(live) == container_args(obj), f"{what}: arguments differ"
        if obj["kind"] == KIND:  # a role service: the spec the parent writes is the one render printed
            assert live["spec"] == obj["spec"]


def test_the_examples_cover_a_router_a_pd_split_and_a_multi_node_group() -> None:
    kinds = {p.stem: {o["kind"] for o in render(p)} for p in EXAMPLES}
    assert any("Deployment" in k and KIND not in k for k in kinds.values()), "an example with a router"
    assert any(KIND in k for k in kinds.values()), "an example with a P/D split"
    assert any("LeaderWorkerSet" in k for k in kinds.values()), "a multi-node example"


def _row_of(desired: Desired) -> dict[tuple[str, str], int]:
    """Each rendered object of the service itself by the index of the row that owns it (controller/steps.py)."""
    return {(o["kind"], o["metadata"]["name"]): i for i, step in enumerate(STEPS) for o in step.objects(desired)}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
async def test_a_pass_walks_the_rows_in_the_order_render_prints_them_and_a_converged_pass_writes_nothing(
    path: Path,
) -> None:
    body = load(path)
    kube = await reconciled(body)
    desired = Desired(spec=parse_resource({**body, "metadata": {**body["metadata"], "namespace": NAMESPACE}}).spec,
                      owner=Owner(name=body["metadata"]["name"], namespace=NAMESPACE))  # fmt: skip
    rows = _row_of(desired)
    created = [rows[(c.kind, c.name)] for c in kube.requests("create") if (c.kind, c.name) in rows]
    assert created, "the first pass created the service's objects"
    assert created == sorted(created), f"creates out of the rows' order: {created}"
    # one more pass over every service, now that nothing is missing: no row creates, patches or deletes
    kube.calls.clear()
    ctx = Context(kube=kube, events=lambda *e: None, now=lambda: "2026-12-01T00:00:00Z")
    for service in kube.of_kind(KIND, NAMESPACE):
        memory = ServiceMemory()
        await reconcile(service, ctx, memory)
    writes = [(c.verb, c.kind, c.name) for c in kube.requests("create", "patch", "delete")]
    assert writes == [], f"a converged pass wrote {writes}"


async def test_a_slow_pass_says_where_its_time_went(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass that reacts late says where its time went: here the API server takes 10 s per pod create and
    3 s for the status patch (the operator's clock advances as it answers), so the line names the engines row
    and the status patch with their times, slowest first, and nothing that took no time."""
    clock = [0.0]

    class SlowApi(FakeKube):
        async def create(self, body: Any) -> bool:
            clock[0] += 10.0 if body.get("kind") == "Pod" else 0.0
            return await super().create(body)

        async def patch(self, res: Resource, *args: Any, **kwargs: Any) -> Any:
            clock[0] += 3.0 if res is SERVICE_CR else 0.0
            return await super().patch(res, *args, **kwargs)

    body = load(EXAMPLE)
    kube = SlowApi()
    kube.add({**body, "metadata": {**body["metadata"], "generation": 1}}, namespace=NAMESPACE)
    ctx = Context(kube=kube, events=lambda *e: None, now=lambda: "2026-12-01T00:00:00Z", mono=lambda: clock[0])
    laps = Laps(clock=ctx.mono)
    pods = 10.0 * body["spec"]["replicas"]
    monkeypatch.setattr(handlers, "SLOW_PASS_SECONDS", 0.0)  # the pass's wall time is ~0: the fake clock moved
    caplog.set_level("INFO", logger="slow-pass")
    run = functools.partial(reconcile, kube.of_kind(KIND, NAMESPACE)[0], ctx, ServiceMemory(), laps=laps)
    await handlers._guarded(run, stopped=FlagSetter[DaemonStoppingReason]().async_waiter,
                            logger=logging.getLogger("slow-pass"), loop="reconcile", laps=laps)  # fmt: skip
    assert laps.total() == clock[0] == pods + 3.0
    [line] = [r.getMessage() for r in caplog.records]
    assert line.endswith(f": engines {pods:.1f}s, status patch 3.0s"), line
