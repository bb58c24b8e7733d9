"""What the operator creates on a real API server is what `aisctl render` printed, for every example.

Why on a cluster too (tests/controller/test_render_is_reconcile.py runs the same comparison on the test double):
here the objects go through the real API server (its defaulting, the CRD's schema and CEL, owner references,
garbage collection of a P/D split's role services' children by their own uid) and the operator runs as a
user runs it, watching the cluster, so a piece built on another path than render's shows up as a difference.

For each example: apply it into a fresh namespace, wait until every object render printed exists, then
compare the kinds and names of everything the service owns (through its role services too) with render's
list, and the containers' command and arguments of every pod, Deployment and LeaderWorkerSet. No engine
needs to run: the objects exist from the first passes whether or not a pod is ever scheduled.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cluster import ROOT, Cluster, wait_for
from tests.controller.test_render_is_reconcile import container_args
from tests.e2e.operator_fixtures import Proc

pytestmark = pytest.mark.usefixtures("delete_services_first")

EXAMPLES = ROOT / "examples"
#: The kinds the operator can create in a service's namespace (clients/resources.py), as kubectl names them.
KINDS = (
    "pods",
    "services",
    "poddisruptionbudgets.policy",
    "networkpolicies.networking.k8s.io",
    "deployments.apps",
    "serviceaccounts",
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "ascendinferenceservices.inference.ascend.dev",
)
#: Served only where LeaderWorkerSet is installed (the multi-node example's test asks for it).
LWS_KIND = "leaderworkersets.leaderworkerset.x-k8s.io"


def render(path: Path, namespace: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "ascend_operator.cli.main", "render", "-f", str(path), "-n", namespace],
        capture_output=True,
        text=True,
        check=True,
    )
    return list(yaml.safe_load_all(result.stdout))


def owned(
    cluster: Cluster, namespace: str, root_uid: str, kinds: tuple[str, ...]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Every object in `namespace` whose controller chain leads to the service with `root_uid`, by (kind,
    name); LeaderWorkerSet's own children (its pods, its headless Service) are its business, not ours."""
    items = json.loads(cluster.kubectl("get", ",".join(kinds), "-n", namespace, "-o", "json"))["items"]
    by_uid = {o["metadata"]["uid"]: o for o in items}

    def controller(obj: dict[str, Any]) -> dict[str, Any] | None:
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
        return refs[0] if refs else None

    def ours(obj: dict[str, Any]) -> bool:
        ref = controller(obj)
        if ref is None:
            return False
        if ref["uid"] == root_uid:
            return True
        parent = by_uid.get(ref["uid"])
        return parent is not None and parent["kind"] == "AscendInferenceService" and ours(parent)

    return {(o["kind"], o["metadata"]["name"]): o for o in items if ours(o)}


def check_example(cluster: Cluster, namespace: str, path: Path, *, kinds: tuple[str, ...] = KINDS) -> None:
    printed = render(path, namespace)
    want = sorted((o["kind"], o["metadata"]["name"]) for o in printed)
    cluster.apply(yaml.safe_load(path.read_text()), namespace=namespace)
    name = yaml.safe_load(path.read_text())["metadata"]["name"]
    uid = cluster.get_json("ais", name, "-n", namespace)["metadata"]["uid"]

    def complete() -> dict[tuple[str, str], dict[str, Any]] | None:
        made = owned(cluster, namespace, uid, kinds)
        return made if set(want) <= set(made) else None

    made = wait_for(complete, timeout=90, interval=1.0, message=f"{path.name}: every object render printed")
    assert sorted(made) == want, f"{path.name}: the operator made other objects than render printed"
    for obj in printed:
        live = made[(obj["kind"], obj["metadata"]["name"])]
        what = f"{path.name}: {obj['kind']} {obj['metadata']['name']}"
        assert container_args(live) == container_args(obj), f"{what}: arguments differ"
    print(f"\n{path.name}: {len(want)} objects as rendered: {', '.join(f'{k}/{n}' for k, n in want)}")


@pytest.mark.parametrize("example", ["dsv4-flash", "dsv4-flash-long", "dsv4-flash-router", "dsv4-flash-pd"])
def test_a_single_node_example_becomes_what_render_printed(
    cluster: Cluster, namespace: str, operator: Proc, example: str
) -> None:
    check_example(cluster, namespace, EXAMPLES / f"{example}.yaml")


def test_the_multi_node_example_becomes_what_render_printed(
    cluster: Cluster, namespace: str, operator: Proc, lws: None
) -> None:
    check_example(cluster, namespace, EXAMPLES / "dsr1-2node.yaml", kinds=(*KINDS, LWS_KIND))


def test_every_example_service_is_held_to_render_here() -> None:
    """A new example is compared too: this fails until it is named above."""
    named = {"dsv4-flash", "dsv4-flash-long", "dsv4-flash-router", "dsv4-flash-pd", "dsr1-2node"}
    services = {p.stem for p in EXAMPLES.glob("*.yaml") if "\nkind: AscendInferenceService\n" in p.read_text()}
    assert services == named
