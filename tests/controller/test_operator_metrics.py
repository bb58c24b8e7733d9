"""The operator's own series, as Prometheus scrapes them: what the chart's alerts and dashboard read.

Why it exists: an alert on `increase(ascend_operator_rolls_total[1h])` never fires for a service's first
roll if the series appears at 1, and a deleted service whose series stay behind keeps an alert firing
forever. These tests read the default registry's exposition, as a scrape would.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ascend_operator.api.autoscaling import AutoscalingStatus, ScaleReason
from ascend_operator.api.status import RouterStatus
from ascend_operator.controller import operator_metrics
from ascend_operator.disruption import ROLL_RULES, RollReason


def _series(namespace: str, service: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """name + labels (without namespace/service) -> value, for one service's series."""
    out = {}
    for family in text_string_to_metric_families(generate_latest(REGISTRY).decode()):
        for s in family.samples:
            if s.labels.get("namespace") == namespace and s.labels.get("service") == service:
                if s.name.endswith("_created"):
                    continue
                rest = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("namespace", "service")))
                out[(s.name, rest)] = s.value
    return out


def test_roll_counters_exist_at_zero_before_the_first_roll() -> None:
    operator_metrics.start_service("ns-a", "svc")
    series = _series("ns-a", "svc")
    for reason in RollReason:
        assert series[("ascend_operator_rolls_total", (("reason", reason.value),))] == 0.0
    for rule in ROLL_RULES:
        assert series[("ascend_operator_rolls_refused_total", (("rule", rule),))] == 0.0
    operator_metrics.record_roll("ns-a", "svc", RollReason.STALLED)
    operator_metrics.record_refusal("ns-a", "svc", "RateLimited")
    series = _series("ns-a", "svc")
    assert series[("ascend_operator_rolls_total", (("reason", "Stalled"),))] == 1.0
    assert series[("ascend_operator_rolls_refused_total", (("rule", "RateLimited"),))] == 1.0
    operator_metrics.forget_service("ns-a", "svc")
    assert _series("ns-a", "svc") == {}


def test_condition_gauge_keeps_one_series_per_condition_with_the_current_reason() -> None:
    operator_metrics.publish_conditions(
        "ns-b",
        "svc",
        [
            {"type": "Ready", "status": "True", "reason": "AllReplicasReady"},
            {"type": "Degraded", "status": "True", "reason": "Stalled"},
        ],
    )
    assert _series("ns-b", "svc") == {
        ("ascend_operator_service_condition", (("condition", "Ready"), ("reason", "AllReplicasReady"))): 1.0,
        ("ascend_operator_service_condition", (("condition", "Degraded"), ("reason", "Stalled"))): 1.0,
    }
    operator_metrics.publish_conditions(
        "ns-b",
        "svc",
        [
            {"type": "Ready", "status": "True", "reason": "AllReplicasReady"},
            {"type": "Degraded", "status": "False", "reason": "AsExpected"},
        ],
    )
    assert _series("ns-b", "svc") == {
        ("ascend_operator_service_condition", (("condition", "Ready"), ("reason", "AllReplicasReady"))): 1.0,
        ("ascend_operator_service_condition", (("condition", "Degraded"), ("reason", "AsExpected"))): 0.0,
    }
    operator_metrics.forget_service("ns-b", "svc")
    assert _series("ns-b", "svc") == {}


def test_engine_series_follow_the_live_pods() -> None:
    operator_metrics.publish_engines(
        "ns-c", "svc", {"svc-0": (True, "CanaryPassing", False), "svc-1": (False, "EngineNotAnswering", True)}
    )
    operator_metrics.record_canary_failure("ns-c", "svc", "svc-1")
    series = _series("ns-c", "svc")
    assert series[("ascend_operator_engine_ready", (("pod", "svc-0"), ("reason", "CanaryPassing")))] == 1.0
    assert series[("ascend_operator_engine_ready", (("pod", "svc-1"), ("reason", "EngineNotAnswering")))] == 0.0
    assert series[("ascend_operator_engine_loading", (("pod", "svc-0"),))] == 0.0
    assert series[("ascend_operator_engine_loading", (("pod", "svc-1"),))] == 1.0
    assert series[("ascend_operator_canary_failures_total", (("pod", "svc-0"),))] == 0.0
    assert series[("ascend_operator_canary_failures_total", (("pod", "svc-1"),))] == 1.0
    operator_metrics.publish_engines("ns-c", "svc", {"svc-0": (False, "Stalled", False)})  # svc-1 scaled away
    assert _series("ns-c", "svc") == {
        ("ascend_operator_engine_ready", (("pod", "svc-0"), ("reason", "Stalled"))): 0.0,
        ("ascend_operator_engine_loading", (("pod", "svc-0"),)): 0.0,
        ("ascend_operator_canary_failures_total", (("pod", "svc-0"),)): 0.0,
    }
    operator_metrics.forget_service("ns-c", "svc")


def test_exported_names_are_the_registered_series() -> None:
    operator_metrics.start_service("ns-d", "svc")
    operator_metrics.publish_conditions("ns-d", "svc", [{"type": "Ready", "status": "True", "reason": "X"}])
    operator_metrics.publish_engines("ns-d", "svc", {"svc-0": (True, "CanaryPassing", False)})
    every = {"tokensPerSecond": 1.0, "runningRequests": 1, "waitingRequests": 0, "kvCacheUsage": 0.1}
    operator_metrics.publish_figures("ns-d", "svc", {"svc-0": {**every, "ttftP50Seconds": 0.4, "tpotP50Seconds": 0.05}})
    router = RouterStatus(service="svc-router", replicas=1, ready_replicas=1, max_concurrent_requests=32)
    operator_metrics.publish_router("ns-d", "svc", router)
    decision = AutoscalingStatus(
        desired_replicas=2, current_replicas=1, waiting_requests=6, reason=ScaleReason.SCALE_UP
    )
    operator_metrics.publish_autoscaling("ns-d", "svc", decision, bounds=(1, 3))
    names = {name for name, _ in _series("ns-d", "svc")}
    assert names == operator_metrics.SERVICE_EXPORTED
    operator_metrics.forget_service("ns-d", "svc")


def test_autoscaling_series_say_the_decision_and_leave_with_spec_autoscaling() -> None:
    decision = AutoscalingStatus(
        desired_replicas=3, current_replicas=3, waiting_requests=40, running_requests=24, reason=ScaleReason.STEADY
    )
    operator_metrics.publish_autoscaling("ns-a", "svc", decision, bounds=(1, 3))
    operator_metrics.record_scale("ns-a", "svc", up=True)
    series = _series("ns-a", "svc")
    # what the "at maxReplicas with a queue" alert reads
    assert series[("ascend_operator_autoscaling_replicas", (("kind", "current"),))] == 3
    assert series[("ascend_operator_autoscaling_replicas", (("kind", "max"),))] == 3
    assert series[("ascend_operator_autoscaling_signal", (("signal", "waiting_requests"),))] == 40
    assert series[("ascend_operator_autoscaling_decision", (("reason", "Steady"),))] == 1
    assert series[("ascend_operator_autoscaling_scales_total", (("direction", "up"),))] == 1
    assert series[("ascend_operator_autoscaling_scales_total", (("direction", "down"),))] == 0
    assert ("ascend_operator_autoscaling_signal", (("signal", "kv_cache_usage"),)) not in series  # not seen
    operator_metrics.publish_autoscaling("ns-a", "svc", None)
    assert not [k for k in _series("ns-a", "svc") if k[0].startswith("ascend_operator_autoscaling")]


def test_engine_figures_follow_each_scrape_and_leave_with_their_pod_or_their_data() -> None:
    pod0 = {"tokensPerSecond": 812.4, "runningRequests": 16, "waitingRequests": 2, "kvCacheUsage": 0.31}
    operator_metrics.publish_figures(
        "ns-f", "svc", {"svc-0": {**pod0, "ttftP50Seconds": 0.42}, "svc-1": {"runningRequests": 0}}
    )
    series = _series("ns-f", "svc")
    assert series[("ascend_operator_engine_tokens_per_second", (("pod", "svc-0"),))] == 812.4
    assert series[("ascend_operator_engine_kv_cache_usage", (("pod", "svc-0"),))] == 0.31
    assert series[("ascend_operator_engine_ttft_p50_seconds", (("pod", "svc-0"),))] == 0.42
    assert ("ascend_operator_engine_ttft_p50_seconds", (("pod", "svc-1"),)) not in series  # no request finished
    # the next scrape: svc-1 is gone, svc-0 finished nothing in the window
    operator_metrics.publish_figures("ns-f", "svc", {"svc-0": {**pod0, "tokensPerSecond": 0.0}})
    assert _series("ns-f", "svc") == {
        ("ascend_operator_engine_tokens_per_second", (("pod", "svc-0"),)): 0.0,
        ("ascend_operator_engine_running_requests", (("pod", "svc-0"),)): 16.0,
        ("ascend_operator_engine_waiting_requests", (("pod", "svc-0"),)): 2.0,
        ("ascend_operator_engine_kv_cache_usage", (("pod", "svc-0"),)): 0.31,
    }
    operator_metrics.forget_service("ns-f", "svc")
    assert _series("ns-f", "svc") == {}


def test_pass_durations_are_one_fleet_wide_histogram_per_loop() -> None:
    """Not per service (200 services would be 200 histograms); what the dashboard reads to see an operator
    that no longer keeps up (a health pass longer than the scrape interval delays every verdict)."""

    def count(loop: str) -> float:
        return REGISTRY.get_sample_value("ascend_operator_pass_duration_seconds_count", {"loop": loop}) or 0.0

    def slow(loop: str) -> float:  # passes that took longer than 2.5 s
        total = count(loop)
        fast = REGISTRY.get_sample_value("ascend_operator_pass_duration_seconds_bucket", {"loop": loop, "le": "2.5"})
        return total - (fast or 0.0)

    before = {loop: (count(loop), slow(loop)) for loop in ("health", "reconcile")}
    operator_metrics.record_pass("health", 0.02)
    operator_metrics.record_pass("health", 6.0)
    operator_metrics.record_pass("reconcile", 0.004)
    assert (count("health"), slow("health")) == (before["health"][0] + 2, before["health"][1] + 1)
    assert (count("reconcile"), slow("reconcile")) == (before["reconcile"][0] + 1, before["reconcile"][1])
    names = {s.name for f in text_string_to_metric_families(generate_latest(REGISTRY).decode()) for s in f.samples}
    assert names >= {n for n in operator_metrics.FLEET_EXPORTED if "pass_duration" in n}


def test_npu_faults_are_series_by_node_chip_and_level_and_go_when_the_plugin_clears_them() -> None:
    from ascend_operator.contract.mindcluster import ChipFault, NodeReport

    def value(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, labels)

    bad = ChipFault(chip="Ascend910-4", level="SeparateNPU", codes=("80E18402",), network=False, since=None)
    eight = tuple(ChipFault(f"Ascend910-{i}", "SeparateNPU", ("80E18402",), False, None) for i in range(8))
    operator_metrics.publish_chip_reports(
        [
            NodeReport(node="atlas-0", faults=(bad,), updated=1.0, seen=1700.0),  # node clock off: not published
            NodeReport(node="atlas-1", faults=eight, chips_per_node=8),
        ],
        now=1800.0,
    )
    assert value("ascend_operator_npu_faults", node="atlas-0", chip="Ascend910-4", level="SeparateNPU") == 1.0
    assert value("ascend_operator_chip_report_timestamp_seconds", node="atlas-0") == 1700.0
    assert value("ascend_operator_chip_report_timestamp_seconds", node="atlas-1") is None  # it gave no time
    assert value("ascend_operator_node_unhealthy", node="atlas-1") == 1.0
    assert value("ascend_operator_node_unhealthy", node="atlas-0") is None
    names = {s.name for f in text_string_to_metric_families(generate_latest(REGISTRY).decode()) for s in f.samples}
    assert names >= operator_metrics.FLEET_EXPORTED
    operator_metrics.publish_chip_reports(
        [NodeReport(node="atlas-0")], now=1800.0
    )  # the plugin cleared both nodes' faults
    assert value("ascend_operator_chip_report_timestamp_seconds", node="atlas-0") is None
    assert value("ascend_operator_npu_faults", node="atlas-0", chip="Ascend910-4", level="SeparateNPU") is None
    assert value("ascend_operator_node_unhealthy", node="atlas-1") is None
