"""spec.autoscaling on a P/D split (issue 40 item 2): the refusal is gone, and what replaces it refuses only
pool settings the autoscaler could never keep, naming the field (the CEL twins are in the CRD:
tests/validation/test_crd.py counts them; tests/e2e/test_autoscaling_pd.py has the API server refuse one)."""

from typing import Any

import pytest

from ascend_operator.api.parse import parse_spec
from ascend_operator.validation.findings import Severity
from ascend_operator.validation.validate import validate_spec
from tests.validation.test_validation import _body

SPLIT = {"router": {"image": "registry.example/vllm-router:0.1.17"}, "disaggregation": {}}


def _refused(spec: dict[str, Any]) -> list[tuple[str, str]]:
    found = validate_spec(parse_spec({**_body(), **spec}))
    return [(f.rule, f.field) for f in found if f.severity is Severity.ERROR and f.rule.startswith("Autoscaling")]


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        # autoscaling a P/D split is accepted now, with or without pool settings
        ({**SPLIT, "autoscaling": {"maxReplicas": 3}}, []),
        (
            {
                **SPLIT,
                "autoscaling": {
                    "maxReplicas": 4,
                    "pd": {
                        "prefill": {
                            "maxReplicas": 2,
                            "targets": {"queuedPromptTokensPerReplica": 8192, "ttftP90Seconds": 2},
                        },
                        "decode": {"minReplicas": 2, "targets": {"tpotP90Seconds": 0.05}},
                        "decodePerPrefill": {"atLeast": 1, "atMost": 3},
                    },
                },
            },
            [],
        ),
        # pool settings without a split
        (
            {"autoscaling": {"maxReplicas": 3, "pd": {}}},
            [("AutoscalingPoolsNeedDisaggregation", "spec.autoscaling.pd")],
        ),
        # a pool's own min above its max (the max inherited from spec.autoscaling)
        (
            {**SPLIT, "autoscaling": {"maxReplicas": 2, "pd": {"decode": {"minReplicas": 3}}}},
            [("AutoscalingPoolBoundsDecode", "spec.autoscaling.pd.decode.minReplicas")],
        ),
        (
            {**SPLIT, "autoscaling": {"maxReplicas": 4, "pd": {"decodePerPrefill": {"atLeast": 3, "atMost": 2}}}},
            [("AutoscalingRatioOrdered", "spec.autoscaling.pd.decodePerPrefill.atLeast")],
        ),
        # ordered, but no counts within the bounds keep it: prefill >= 3, decode <= 2, at least 1 decode per prefill
        (
            {
                **SPLIT,
                "autoscaling": {
                    "maxReplicas": 4,
                    "pd": {
                        "prefill": {"minReplicas": 3},
                        "decode": {"maxReplicas": 2},
                        "decodePerPrefill": {"atLeast": 1, "atMost": 2},
                    },
                },
            },
            [("AutoscalingRatioReachable", "spec.autoscaling.pd.decodePerPrefill")],
        ),
    ],
)
def test_pool_settings_the_autoscaler_cannot_keep_are_refused_naming_the_field(
    spec: dict[str, Any], refused: list[tuple[str, str]]
) -> None:
    assert _refused(spec) == refused
