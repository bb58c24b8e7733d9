"""`aisctl render` and the real API server on the same mutated specs: render never accepts what apply refuses.

Why: tests/api/test_strict_models.py holds the models to the CRD's structural schema offline, but the API
server also runs the CEL rules and has its own decoder. Here a handful of mutations of the example (the ones
that once rendered, plus a seeded sample of random ones) go through `aisctl render` and through a
server-side dry-run `kubectl apply` (strict field validation, nothing stored). A refusal at apply must be a
refusal of render; render may refuse more (rules without a CEL twin, such as the HBM budget).
"""

import copy
import random
from typing import Any

import pytest
import yaml

from harness.cluster import Cluster, KubectlError
from tests.api.test_strict_models import PATHS, _parent
from tests.cli.test_cli import aisctl
from tests.fixtures.examples import EXAMPLE as EXAMPLE_FILE

pytestmark = pytest.mark.usefixtures("crd")

EXAMPLE = yaml.safe_load(EXAMPLE_FILE.read_text())

ODD: list[Any] = ["128", True, 1.5, "a\nb", "ünïcødé", "", "x" * 70, -1, {"k": 1}, ["x"]]
FIXED = [
    ("engine.port", "128"),
    ("engine.speculative.numSpeculativeTokens", True),
    ("scheduling.nodeSelector.zone", "a\nb"),
    ("image", "ünïcødé"),
    ("engine.gpuMemoryUtilization", 1),
    ("podMetadata.labels.team", "ok-1"),
]


def _mutations() -> list[tuple[str, Any]]:
    rng = random.Random(28)
    sampled = [(".".join(rng.choice(PATHS)), rng.choice(ODD)) for _ in range(14)]
    return FIXED + [(p, v) for p, v in sampled if "[0]" not in p]


def _body(path: str, value: Any, namespace: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(EXAMPLE)
    body["metadata"] = {"name": "mutant", "namespace": namespace}
    *head, last = path.split(".")
    parent = _parent(body["spec"], (*head, last))
    if parent is not None:
        parent[last] = value
    return body


@pytest.mark.parametrize(("path", "value"), _mutations(), ids=lambda x: str(x)[:40])
def test_render_refuses_whatever_apply_refuses(cluster: Cluster, namespace: str, path: str, value: Any) -> None:
    body = _body(path, value, namespace)
    rendered = aisctl("render", "-f", "-", stdin=yaml.safe_dump(body))
    assert rendered.returncode in (0, 2), rendered.stderr
    try:
        cluster.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(body))
        applied, why = True, ""
    except KubectlError as exc:
        applied, why = False, str(exc)
    if not applied:
        assert rendered.returncode == 2, f"apply refused ({why}) but aisctl rendered it"
    if rendered.returncode == 2 and applied:
        # only a rule the CRD cannot state may make render stricter: never a field's type or format
        assert "Input should be" not in rendered.stderr, rendered.stderr
        assert "must be a Kubernetes label value" not in rendered.stderr, rendered.stderr
        assert "must be an image reference" not in rendered.stderr, rendered.stderr
