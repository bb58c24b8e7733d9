"""spec.scheduling.schedulerName, spec.scheduling.volcano and spec.priorityClassName: every pod a service
makes, in every shape (single-node engines, a two-node LeaderWorkerSet's leader and workers, the router, a
P/D split's role engines and its router), is bound by the scheduler the spec names, at its priority, in its
Volcano queue; and the annotations are where Volcano and LeaderWorkerSet v0.7.0 read them (api/scheduling.py).

What LWS does with the set (one PodGroup per group, minMember = the group's size, queue from the set's
annotation: sigs.k8s.io/lws v0.7.0 pkg/schedulerprovider/volcano_provider.go:47-98) is LWS's; here the
set is held to carry what that code reads.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import SpecError, parse_resource
from ascend_operator.controller.steps import rendered
from ascend_operator.render.desired import Desired
from ascend_operator.render.lws import group_spec_hash
from ascend_operator.render.pod import Owner, spec_hash
from ascend_operator.validation import Severity, validate_spec
from tests.cli.test_cli import aisctl
from tests.fixtures.examples import EXAMPLE

ROOT = Path(__file__).resolve().parents[2]
OWNER = Owner(name="svc", namespace="llm", uid="3f1c7f9e-0000-4000-8000-000000000038")
QUEUE = "scheduling.volcano.sh/queue-name"
VOLCANO = {"schedulerName": "volcano", "volcano": {"queue": "llm-serving"}}
ROUTER = {"image": "registry.example/vllm-router:0.1.17"}


def _body(path: Path = EXAMPLE, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    body["spec"].setdefault("scheduling", {})
    for key, value in spec.items():
        if key == "scheduling":
            body["spec"]["scheduling"].update(value)
        else:
            body["spec"][key] = value
    return body


def _pods(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, pod metadata, pod spec) of every pod and pod template in the rendered objects."""
    out = []
    for obj in objects:
        where, spec = f"{obj['kind']}/{obj['metadata']['name']}", obj.get("spec") or {}
        if obj["kind"] == "Pod":
            out.append((where, obj["metadata"], spec))
        elif "template" in spec:
            out.append((where, spec["template"]["metadata"], spec["template"]["spec"]))
        elif "leaderWorkerTemplate" in spec:
            lwt = spec["leaderWorkerTemplate"]
            for role in ("leaderTemplate", "workerTemplate"):
                out.append((f"{where}/{role}", lwt[role]["metadata"], lwt[role]["spec"]))
    return out


def _all(body: dict[str, Any]) -> list[dict[str, Any]]:
    return rendered(Desired(spec=parse_resource(body).spec, owner=OWNER))


SHAPES = {
    "single-node with router": lambda: _body(router=ROUTER, replicas=2, priorityClassName="llm-serving-high"),
    "two-node group with router": lambda: _body(
        ROOT / "examples" / "dsr1-2node.yaml", router=ROUTER, priorityClassName="llm-serving-high"
    ),
    "P/D split": lambda: _body(router=ROUTER, replicas=2, disaggregation={}, priorityClassName="llm-serving-high"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_pod_of_every_shape_is_volcanos_in_the_queue_at_the_priority(shape: str) -> None:
    body = SHAPES[shape]()
    body["spec"]["scheduling"].update(VOLCANO)
    pods = _pods(_all(body))
    kinds = {where.split("/")[0] for where, _, _ in pods}
    assert "Deployment" in kinds  # the router's pods are among them
    assert len(pods) >= 3
    for where, meta, spec in pods:
        assert spec.get("schedulerName") == "volcano", where
        assert spec.get("priorityClassName") == "llm-serving-high", where
        assert (meta.get("annotations") or {}).get(QUEUE) == "llm-serving", where


@pytest.mark.parametrize("shape", SHAPES)
def test_without_the_fields_no_pod_names_a_scheduler_queue_or_priority(shape: str) -> None:
    body = SHAPES[shape]()
    body["spec"].pop("priorityClassName")
    for where, meta, spec in _pods(_all(body)):
        assert not {"schedulerName", "priorityClassName"} & set(spec), where
        assert QUEUE not in (meta.get("annotations") or {}), where


def test_the_leader_worker_set_carries_the_queue_lws_copies_into_each_groups_podgroup() -> None:
    """volcano_provider.go:82-84 reads the queue from the LeaderWorkerSet's own annotations, not the pods'."""
    body = _body(ROOT / "examples" / "dsr1-2node.yaml", scheduling=VOLCANO)
    (lws,) = [o for o in _all(body) if o["kind"] == "LeaderWorkerSet"]
    assert lws["metadata"]["annotations"][QUEUE] == "llm-serving"
    # LWS's PodGroup takes minMember from the group's size (volcano_provider.go:69): the whole group or nothing
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"  # LeaderReady would make minMember 1 (:78-80)


def test_a_new_scheduler_or_queue_replaces_the_engines_that_joined_the_old_one() -> None:
    """A pod's schedulerName is immutable and Volcano reads the queue when it makes the pod's PodGroup, so
    running engines keep the old ones: the spec hash must change (one roll, through the budget)."""
    plain = parse_resource(_body()).spec
    volcano = parse_resource(_body(scheduling=VOLCANO)).spec
    other_queue = parse_resource(_body(scheduling={**VOLCANO, "volcano": {"queue": "batch"}})).spec
    assert len({spec_hash(plain), spec_hash(volcano), spec_hash(other_queue)}) == 3
    two = ROOT / "examples" / "dsr1-2node.yaml"
    hashes = {
        group_spec_hash(parse_resource(_body(two, scheduling=s)).spec)
        for s in ({}, VOLCANO, {**VOLCANO, "volcano": {"queue": "b"}})
    }
    assert len(hashes) == 3


def test_a_queue_without_volcano_as_scheduler_is_refused_naming_the_field() -> None:
    findings = validate_spec(parse_resource(_body(scheduling={"volcano": {"queue": "llm-serving"}})).spec)
    errors = [f"{f.field} {f.rule}" for f in findings if f.severity is Severity.ERROR]
    assert errors == ["spec.scheduling.volcano VolcanoNeedsSchedulerName"]
    result = aisctl("render", "-f", "-", stdin=yaml.safe_dump(_body(scheduling={"volcano": {"queue": "q"}})))
    assert result.returncode == 2
    assert "spec.scheduling.volcano" in result.stderr


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scheduling": {"schedulerName": "Volcano"}}, "spec.scheduling.schedulerName"),
        ({"scheduling": {"schedulerName": "volcano", "volcano": {"queue": "Team_A"}}}, "spec.scheduling.volcano.queue"),
        ({"scheduling": {"schedulerName": "volcano", "volcano": {}}}, "spec.scheduling.volcano.queue"),
        ({"priorityClassName": "high priority"}, "spec.priorityClassName"),
        ({"priorityClassName": "x" * 254}, "spec.priorityClassName"),
    ],
)
def test_names_the_api_server_would_refuse_on_a_pod_are_refused_at_apply_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    """schedulerName and priorityClassName are DNS-1123 subdomains on a pod (Kubernetes ValidatePodSpec), so a
    bad one would pass apply and fail only at the pod's creation. The models are the CRD's schema
    (tests/validation/test_crd.py), so the parse names the field as the API server does."""
    with pytest.raises(SpecError) as refused:
        parse_resource(_body(**change))
    assert [p.split(":")[0] for p in refused.value.problems] == [field]


def test_the_crd_carries_the_rule_for_kubectl_apply() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "inference.ascend.dev_ascendinferenceservices.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    (rule,) = schema["scheduling"]["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.volcano) || has(self.schedulerName)"
    assert rule["fieldPath"] == ".volcano"
