"""The chart's PrometheusRule, checked and unit-tested by the real Prometheus rule checker.

Why it exists: an alert is only discovered to be wrong when it should have paged. `promtool check rules`
(Prometheus 3.16.0, built from github.com/prometheus/prometheus v0.316.0 by hack/build-k8s.sh) parses
every expression and template as Prometheus will; `promtool test rules` feeds synthetic series through
each alert and compares what fires (labels and expanded annotations) with what a user should see: it
fires on the failure it names after the wait it promises, and stays quiet on the look-alikes (a service
that is fine, a refusal by another rule, an engine still loading, an idle engine with a stale KV gauge).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cluster import build_tools
from tests.helm.chart import CHART, Helm, one, pick

ALERTS = [
    "AscendServiceDegraded",
    "AscendRollRateLimited",
    "AscendRepeatedStalls",
    "AscendRepeatedDriftRolls",
    "AscendEngineNotAnswering",
    "AscendCanaryFailures",
    "AscendNPUFault",
    "AscendNodeUnhealthy",
    "AscendDevicePluginReportStale",
    "AscendPodOnFaultyChip",
    "AscendKVCacheNearlyFull",
    "AscendAutoscalingAtMax",
]
ON = ["prometheusRule.enabled=true"]

pytestmark = pytest.mark.tools("promtool")  # the root conftest.py waits for its build


def find_promtool() -> Path:
    """$AIS_PROMTOOL, else the promtool hack/build-k8s.sh builds into the tool cache."""
    given = os.environ.get("AIS_PROMTOOL")
    promtool = Path(given) if given else build_tools("promtool") / "promtool"
    if not promtool.exists():
        raise FileNotFoundError(f"no promtool at {promtool}")
    return promtool


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_promtool()), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def values_file(tmp_path: Path, **rule: Any) -> Path:
    """A values file with prometheusRule settings (`--set` would pass a float as a string)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"prometheusRule": rule}))
    return path


def rule_file(helm: Helm, tmp_path: Path, sets: list[str], *values: Path) -> Path:
    """The rendered PrometheusRule's spec as a Prometheus rule file."""
    rule = one(helm.template(*values, sets=sets), "PrometheusRule")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return path


def _labels(rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


def test_off_by_default(helm: Helm) -> None:
    assert not pick(helm.template(), "PrometheusRule")


def test_promtool_check_rules_passes(helm: Helm, tmp_path: Path) -> None:
    path = rule_file(helm, tmp_path, ON)
    result = promtool("check", "rules", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_every_alert_has_a_runbook_in_the_readme_and_a_link_when_asked(helm: Helm) -> None:
    rule = one(helm.template(sets=[*ON, "prometheusRule.runbookUrl=https://example.org/chart"]), "PrometheusRule")
    rules = _labels(rule)
    assert list(rules) == ALERTS
    readme = (CHART / "README.md").read_text()
    for name, body in rules.items():
        assert f"\n### {name}\n" in readme, f"no runbook section for {name} in the chart README"
        assert body["annotations"]["runbook_url"] == f"https://example.org/chart#{name.lower()}"
        assert body["labels"]["severity"] in ("warning", "critical")
    plain = _labels(one(helm.template(sets=ON), "PrometheusRule"))
    assert all("runbook_url" not in r["annotations"] for r in plain.values())


def test_thresholds_and_labels_come_from_values(helm: Helm, tmp_path: Path) -> None:
    values = values_file(
        tmp_path,
        enabled=True,
        degradedFor="30m",
        kvCacheUsage=0.9,
        alertLabels={"team": "llm"},
        labels={"release": "kube-prometheus"},
    )
    rule = one(helm.template(values), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus"
    rules = _labels(rule)
    assert rules["AscendServiceDegraded"]["for"] == "30m"
    assert "> 0.9)" in rules["AscendKVCacheNearlyFull"]["expr"]
    assert all(r["labels"]["team"] == "llm" for r in rules.values())


def test_alert_labels_may_not_override_severity(helm: Helm) -> None:
    from tests.helm.chart import HelmError

    with pytest.raises(HelmError, match="schema"):
        helm.template(sets=[*ON, "prometheusRule.alertLabels.severity=info"])


# --- promtool test rules: synthetic series (1 m apart) and what must fire -----------------------------


def _cond(service: str, reason: str) -> str:
    labels = f'namespace="llm",service="{service}",condition="Degraded",reason="{reason}"'
    return f"ascend_operator_service_condition{{{labels}}}"


def _engine(pod: str, reason: str) -> str:
    return f'ascend_operator_engine_ready{{namespace="llm",service="a",pod="{pod}",reason="{reason}"}}'


def _loading(pod: str) -> str:
    return f'ascend_operator_engine_loading{{namespace="llm",service="a",pod="{pod}"}}'


def _kv(pod: str, metric: str) -> str:
    return f'vllm:{metric}{{namespace="llm",ais="a",pod="{pod}"}}'


DEGRADED_A = {
    "summary": "AscendInferenceService llm/a is Degraded",
    "description": "llm/a has been Degraded for more than 10m; the reason and the pod are on its Degraded condition "
    "(kubectl describe ais -n llm a).",
}

SCENARIOS: list[dict[str, Any]] = [
    {
        "name": "Degraded for 10 minutes, through a change of reason; a healthy service stays quiet",
        "series": [
            (_cond("a", "Stalled"), "1x5"),
            (_cond("a", "ConfigMismatch"), "_x5 1x15"),
            (_cond("b", "AsExpected"), "0x20"),
            ('ascend_operator_service_condition{namespace="llm",service="b",condition="Ready",reason="X"}', "1x20"),
        ],
        "alerts": [
            ("AscendServiceDegraded", "9m", []),
            (
                "AscendServiceDegraded",
                "11m",
                [({"namespace": "llm", "service": "a", "severity": "warning"}, DEGRADED_A)],
            ),
        ],
    },
    {
        "name": "A roll refused by the hourly limit fires; one refused for cooldown does not",
        "series": [
            ('ascend_operator_rolls_refused_total{namespace="llm",service="a",rule="RateLimited"}', "0x10 1 2 3x10"),
            ('ascend_operator_rolls_refused_total{namespace="llm",service="c",rule="Cooldown"}', "0 1 2 3 4x20"),
        ],
        "alerts": [
            ("AscendRollRateLimited", "5m", []),
            (
                "AscendRollRateLimited",
                "12m",
                [
                    (
                        {"namespace": "llm", "service": "a", "severity": "warning"},
                        {
                            "summary": "A roll of llm/a was refused by the hourly limit",
                            "description": "The operator found a pod of llm/a to recreate but the service already "
                            "used spec.health.rolls.maxPerHour; the engine stays as it is until the hour passes.",
                        },
                    )
                ],
            ),
            ("AscendRollRateLimited", "40m", []),
        ],
    },
    {
        "name": "Two stall rolls in an hour fire, one does not; two drift rolls in a day fire",
        "series": [
            ('ascend_operator_rolls_total{namespace="llm",service="a",reason="Stalled"}', "0 0 0 1 1 1 2x10"),
            ('ascend_operator_rolls_total{namespace="llm",service="d",reason="Stalled"}', "0 0 1x14"),
            ('ascend_operator_rolls_total{namespace="llm",service="a",reason="ThroughputDrift"}', "0x3 1x5 2x5"),
            ('ascend_operator_rolls_total{namespace="llm",service="d",reason="ThroughputDrift"}', "0x3 1x10"),
        ],
        "alerts": [
            ("AscendRepeatedStalls", "4m", []),
            (
                "AscendRepeatedStalls",
                "10m",
                [
                    (
                        {"namespace": "llm", "service": "a", "severity": "critical"},
                        {
                            "summary": "llm/a stalled 2 times in an hour",
                            "description": "Engines of llm/a stopped making forward progress with requests running "
                            "and were recreated 2 times in the last hour.",
                        },
                    )
                ],
            ),
            (
                "AscendRepeatedDriftRolls",
                "12m",
                [
                    (
                        {"namespace": "llm", "service": "a", "severity": "warning"},
                        {
                            "summary": "llm/a was rolled 2 times for throughput drift in a day",
                            "description": "Engines of llm/a keep slowing down at the same batch size and are "
                            "recreated for it.",
                        },
                    )
                ],
            ),
        ],
    },
    {
        "name": "An engine past its grace that answers nothing fires after 5 minutes; a loading one does not",
        "series": [
            (_engine("a-0", "EngineNotAnswering"), "0x15"),
            (_loading("a-0"), "0x15"),
            (_engine("a-1", "EngineNotAnswering"), "0x15"),
            (_loading("a-1"), "1x15"),
            (_engine("a-2", "CanaryPassing"), "1x15"),
            (_loading("a-2"), "0x15"),
        ],
        "alerts": [
            ("AscendEngineNotAnswering", "4m", []),
            (
                "AscendEngineNotAnswering",
                "7m",
                [
                    (
                        {
                            "namespace": "llm",
                            "service": "a",
                            "pod": "a-0",
                            "reason": "EngineNotAnswering",
                            "severity": "critical",
                        },
                        {
                            "summary": "Engine llm/a-0 does not answer",
                            "description": "The operator gets no /metrics answer from pod a-0 of llm/a; it is out "
                            "of the Service and the InferencePool's ready endpoints.",
                        },
                    )
                ],
            ),
        ],
    },
    {
        "name": "Three counted canary failures of a pod in 10 minutes fire; one does not",
        "series": [
            ('ascend_operator_canary_failures_total{namespace="llm",service="a",pod="a-0"}', "0 0 1 2 3x10"),
            ('ascend_operator_canary_failures_total{namespace="llm",service="a",pod="a-1"}', "0 1x12"),
        ],
        "alerts": [
            ("AscendCanaryFailures", "3m", []),
            (
                "AscendCanaryFailures",
                "5m",
                [
                    (
                        {"namespace": "llm", "service": "a", "pod": "a-0", "severity": "warning"},
                        {
                            "summary": "Generation canaries fail on llm/a-0",
                            "description": "3 canaries of pod a-0 (llm/a) got no tokens in time in 10 minutes, and "
                            "the engine made no forward progress meanwhile.",
                        },
                    )
                ],
            ),
        ],
    },
    {
        "name": "KV above 95% with requests running fires after 5 minutes; an idle stale 99% does not",
        "series": [
            (_kv("a-0", "kv_cache_usage_perc"), "0.98x15"),
            (_kv("a-0", "num_requests_running"), "2x15"),
            (_kv("a-1", "kv_cache_usage_perc"), "0.99x15"),
            (_kv("a-1", "num_requests_running"), "0x15"),
            (_kv("a-2", "kv_cache_usage_perc"), "0.5x15"),
            (_kv("a-2", "num_requests_running"), "5x15"),
        ],
        "alerts": [
            ("AscendKVCacheNearlyFull", "4m", []),
            (
                "AscendKVCacheNearlyFull",
                "6m",
                [
                    (
                        {"namespace": "llm", "ais": "a", "pod": "a-0", "severity": "warning"},
                        {
                            "summary": "KV cache of llm/a-0 is 98% full",
                            "description": "The engine of llm/a (a-0) has used more than the threshold of its KV "
                            "cache with requests running; new long requests queue, running ones may be preempted "
                            "or stall.",
                        },
                    )
                ],
            ),
        ],
    },
]


def _chip(node: str, chip: str, level: str) -> str:
    return f'ascend_operator_npu_faults{{node="{node}",chip="{chip}",level="{level}"}}'


SCENARIOS += [
    {
        "name": "A chip fault the plugin keeps reporting fires after 2 minutes; a RestartRequest that clears and "
        "sub-health do not",
        "series": [
            (_chip("atlas-0", "Ascend910-4", "SeparateNPU"), "1x10"),
            (_chip("atlas-1", "Ascend910-2", "RestartRequest"), "1 stale"),
            (_chip("atlas-1", "Ascend910-5", "SubHealthFault"), "1x10"),
        ],
        "alerts": [
            ("AscendNPUFault", "1m", []),
            (
                "AscendNPUFault",
                "3m",
                [
                    (
                        {"node": "atlas-0", "chip": "Ascend910-4", "level": "SeparateNPU", "severity": "critical"},
                        {
                            "summary": "NPU Ascend910-4 of node atlas-0 is faulty (SeparateNPU)",
                            "description": "The Ascend device plugin reports chip Ascend910-4 of node atlas-0 faulty "
                            "at level SeparateNPU; the operator rolled the engine on it, and the chip is out of the "
                            "node's allocatable until the plugin resets or an operator replaces it.",
                        },
                    )
                ],
            ),
        ],
    },
    {
        "name": "An unhealthy node fires after a minute",
        "series": [('ascend_operator_node_unhealthy{node="atlas-3"}', "1x5")],
        "alerts": [
            (
                "AscendNodeUnhealthy",
                "2m",
                [
                    (
                        {"node": "atlas-3", "severity": "critical"},
                        {
                            "summary": "Node atlas-3 is unfit for NPU workloads",
                            "description": "NodeD reports node atlas-3 UnHealthy, or most of its chips are faulty; its "
                            "engines are rolled elsewhere as capacity allows.",
                        },
                    )
                ],
            )
        ],
    },
    {
        "name": "A plugin that stopped writing fires once its report is 15 minutes old for 5; a writing one never",
        "series": [
            ('ascend_operator_chip_report_timestamp_seconds{node="atlas-0"}', "0x30"),
            ('ascend_operator_chip_report_timestamp_seconds{node="atlas-1"}', "0+60x30"),
        ],
        "alerts": [
            ("AscendDevicePluginReportStale", "19m", []),
            (
                "AscendDevicePluginReportStale",
                "21m",
                [
                    (
                        {"node": "atlas-0", "severity": "warning"},
                        {
                            "summary": "The Ascend device plugin's report of node atlas-0 is stale",
                            "description": "The device plugin last reported node atlas-0 21m 0s ago (it rewrites "
                            "its report at least every 5 minutes): the plugin has stopped, and the operator does "
                            "not act on the faults of a report over 15 minutes old.",
                        },
                    )
                ],
            ),
        ],
    },
    {
        "name": "A pod held on a faulty chip fires after 5 minutes; one rolled within a minute does not",
        "series": [
            (_engine("a-0", "NPUFault"), "0x10"),
            (_engine("a-1", "NPUFault"), "0 stale"),
            (_engine("a-1", "CanaryPassing"), "_ 1x10"),
        ],
        "alerts": [
            ("AscendPodOnFaultyChip", "4m", []),
            (
                "AscendPodOnFaultyChip",
                "6m",
                [
                    (
                        {"namespace": "llm", "service": "a", "pod": "a-0", "reason": "NPUFault", "severity": "warning"},
                        {
                            "summary": "Pod llm/a-0 stays on faulty hardware (NPUFault)",
                            "description": "Pod a-0 of llm/a is out of the Service for NPUFault and has not been "
                            "rolled: the Degraded condition names the rule holding it (maxUnavailable, or no node "
                            "with free NPUs for its successor).",
                        },
                    )
                ],
            ),
        ],
    },
]


def _scaled(service: str, kind: str) -> str:
    return f'ascend_operator_autoscaling_replicas{{namespace="llm",service="{service}",kind="{kind}"}}'


def _waiting(service: str) -> str:
    return f'ascend_operator_autoscaling_signal{{namespace="llm",service="{service}",signal="waiting_requests"}}'


SCENARIOS.append(
    {
        "name": "At maxReplicas with a queue for 10 minutes fires; at max without a queue, or below max, does not",
        "series": [
            # a: 2 replicas, then 3 = max from minute 3 with 12 waiting throughout
            (_scaled("a", "current"), "2x2 3x20"),
            (_scaled("a", "max"), "3x22"),
            (_waiting("a"), "12x22"),
            # b: at max, idle engines; c: a queue, but room to grow
            (_scaled("b", "current"), "3x22"),
            (_scaled("b", "max"), "3x22"),
            (_waiting("b"), "0x22"),
            (_scaled("c", "current"), "2x22"),
            (_scaled("c", "max"), "3x22"),
            (_waiting("c"), "40x22"),
        ],
        "alerts": [
            ("AscendAutoscalingAtMax", "12m", []),
            (
                "AscendAutoscalingAtMax",
                "14m",
                [
                    (
                        {"namespace": "llm", "service": "a", "severity": "warning"},
                        {
                            "summary": "llm/a is at spec.autoscaling.maxReplicas with requests waiting",
                            "description": "The autoscaler of llm/a wants more replicas than maxReplicas allows and "
                            "requests wait in its engines; raise maxReplicas if the cluster has the NPUs.",
                        },
                    )
                ],
            ),
        ],
    }
)


def _test_file(rules: Path) -> dict[str, Any]:
    tests = []
    for scenario in SCENARIOS:
        tests.append(
            {
                "name": scenario["name"],
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in scenario["series"]],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": name,
                        "exp_alerts": [{"exp_labels": labels, "exp_annotations": notes} for labels, notes in fired],
                    }
                    for name, at, fired in scenario["alerts"]
                ],
            }
        )
    return {"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}


def test_every_alert_is_unit_tested() -> None:
    tested = {name for s in SCENARIOS for name, _, fired in s["alerts"] if fired}
    assert tested == set(ALERTS)


def test_promtool_test_rules_passes(helm: Helm, tmp_path: Path) -> None:
    rules = rule_file(helm, tmp_path, ON)
    spec = tmp_path / "alerts_test.yaml"
    spec.write_text(yaml.safe_dump(_test_file(rules), sort_keys=False, width=1000))
    result = promtool("test", "rules", str(spec), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_test_rules_fails_on_a_wrong_expectation(helm: Helm, tmp_path: Path) -> None:
    """The harness can fail: a threshold moved above the scenario's series makes its expectation wrong."""
    rules = rule_file(helm, tmp_path, [], values_file(tmp_path, enabled=True, kvCacheUsage=0.99))
    spec = tmp_path / "alerts_test.yaml"
    spec.write_text(yaml.safe_dump(_test_file(rules), sort_keys=False, width=1000))
    result = promtool("test", "rules", str(spec), cwd=tmp_path)
    assert result.returncode != 0
    assert "AscendKVCacheNearlyFull" in result.stdout + result.stderr
