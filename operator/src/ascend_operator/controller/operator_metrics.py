"""The operator's own Prometheus series: what the chart's PrometheusRule alerts on and the dashboard shows.

Why one module: every series name, its labels and its cleanup live together, so the alert rules, the
dashboard test and the code that updates them agree on one list (`EXPORTED`). The series are in
prometheus-client's default registry (`aisctl operator --metrics-port` serves it).

- `ascend_operator_rolls_total{namespace,service,reason}` and `..._rolls_refused_total{...,rule}`: created
  at 0 for every reason and rule as soon as a service is seen, so `increase()` sees the first roll (a
  counter series that appears at 1 has no increase to Prometheus);
- `ascend_operator_service_condition{namespace,service,condition,reason}`: 1 while the condition is True,
  0 while False; one series per condition, the one with the current reason;
- `ascend_operator_engine_ready{namespace,service,pod,reason}`: the readiness gate the operator sets on
  each engine pod (1 ready, 0 not) with its verdict's reason (EngineNotAnswering, Stalled, ...);
- `ascend_operator_engine_loading{namespace,service,pod}`: 1 while a pod that was never Ready is inside
  its startup grace (~292 GB of weights load for minutes, and the engine answers nothing meanwhile), so an
  alert on engines not answering can leave loading ones out;
- `ascend_operator_canary_failures_total{namespace,service,pod}`: canaries that counted as failures (no
  tokens in time and no forward progress meanwhile: the judgement of health/judge.py fold_canary).
- `ascend_operator_engine_{tokens_per_second,running_requests,waiting_requests,kv_cache_usage,
  ttft_p50_seconds,tpot_p50_seconds}{namespace,service,pod}`: each engine pod's figures over the last
  30 s, refreshed every scrape (the status carries the service's sums at most every 30 s; these are
  the full-rate copy). A figure without data (no request finished in the window) has no series.
Series of a pod or service that is gone are removed, so a deleted service leaves no alert behind.
- `ascend_operator_router_admission_limit{namespace,service,limit}` (`concurrent`, `queue`) and
  `ascend_operator_router_ready_replicas{namespace,service}`: what a service's router admits (summed over its
  replicas) and how many router pods are Ready. Its queue's depth is not among them: vllm-router 0.1.17
  exports a queue gauge for embeddings only (src/metrics.rs:268, middleware.rs:546-549).
- `ascend_operator_autoscaling_replicas{namespace,service,kind}` (`desired`, `current`, `min`, `max`, `ready`,
  `loading`), `ascend_operator_autoscaling_signal{namespace,service,signal}` (`waiting_requests`,
  `running_requests`, `kv_cache_usage`, `ttft_p90_seconds`, `wanted_replicas`), `ascend_operator_autoscaling_
  decision{namespace,service,reason}` (1 for the last decision's reason) and `ascend_operator_autoscaling_
  scales_total{namespace,service,direction}` (`up`, `down`, created at 0): spec.autoscaling's decisions and
  what they were made on; a service without spec.autoscaling has none of them.
- `ascend_operator_pass_duration_seconds{loop}` (histogram, fleet-wide, `loop` = reconcile or health): how
  long one pass of a service's loop takes. A health pass that takes longer than the scrape interval delays
  every verdict (a stall is rolled one window after the last progress seen, at the next pass), so this is
  where an operator that no longer keeps up with its fleet shows first.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from ascend_operator.api.autoscaling import AutoscalingStatus
from ascend_operator.api.status import RouterStatus
from ascend_operator.contract.mindcluster import NodeReport
from ascend_operator.disruption.model import ROLL_RULES, RollReason
from ascend_operator.health.chips import node_unhealthy

ROLLS = Counter("ascend_operator_rolls", "Pods recreated by the operator", ["namespace", "service", "reason"])
REFUSED = Counter("ascend_operator_rolls_refused", "Rolls the policy refused", ["namespace", "service", "rule"])
SERVICE_CONDITION = Gauge(
    "ascend_operator_service_condition",
    "1 while the service's condition is True, 0 while False, labelled with its current reason",
    ["namespace", "service", "condition", "reason"],
)
ENGINE_READY = Gauge(
    "ascend_operator_engine_ready",
    "The operator's readiness verdict of an engine pod (1 ready, 0 not) with its reason",
    ["namespace", "service", "pod", "reason"],
)
ENGINE_LOADING = Gauge(
    "ascend_operator_engine_loading",
    "1 while an engine pod that was never Ready is inside its startup grace, else 0",
    ["namespace", "service", "pod"],
)
CANARY_FAILURES = Counter(
    "ascend_operator_canary_failures",
    "Generation canaries that returned no tokens in time while the engine made no forward progress",
    ["namespace", "service", "pod"],
)

NPU_FAULTS = Gauge(
    "ascend_operator_npu_faults",
    "1 per chip the Ascend device plugin reports faulty, by node, chip and MindCluster fault level (with --npu-faults)",
    ["node", "chip", "level"],
)
CHIP_REPORT_TIME = Gauge(
    "ascend_operator_chip_report_timestamp_seconds",
    "When the operator saw the Ascend device plugin's report of a node change, by the operator's clock (the "
    "plugin rewrites it at least every 5 minutes; unchanged for 15 the operator stops acting on it) "
    "(with --npu-faults)",
    ["node"],
)
NODE_UNHEALTHY = Gauge(
    "ascend_operator_node_unhealthy",
    "1 per node NodeD reports UnHealthy or with most of its chips faulty (with --npu-faults)",
    ["node"],
)
_CHIP_SERIES: dict[str, set[tuple[str, ...]]] = {"faults": set(), "nodes": set(), "stamps": set()}
ROUTER_ADMISSION = Gauge(
    "ascend_operator_router_admission_limit",
    "What the service's router replicas admit together: `concurrent` requests at once, `queue` more waiting",
    ["namespace", "service", "limit"],
)
ROUTER_READY = Gauge(
    "ascend_operator_router_ready_replicas", "Router pods Ready, of spec.router.replicas", ["namespace", "service"]
)

AUTOSCALING_REPLICAS = Gauge(
    "ascend_operator_autoscaling_replicas",
    "spec.autoscaling's replicas: desired (its last decision), current (spec.replicas), min, max, ready, loading",
    ["namespace", "service", "kind"],
)
AUTOSCALING_SIGNAL = Gauge(
    "ascend_operator_autoscaling_signal",
    "What spec.autoscaling's last decision saw: waiting/running requests, KV usage, TTFT p90, wanted replicas",
    ["namespace", "service", "signal"],
)
AUTOSCALING_DECISION = Gauge(
    "ascend_operator_autoscaling_decision",
    "1 for the reason of spec.autoscaling's last decision (ScaledUp, Steady, NoCapacity, OtherAutoscaler, ...)",
    ["namespace", "service", "reason"],
)
AUTOSCALING_SCALES = Counter(
    "ascend_operator_autoscaling_scales",
    "Times spec.autoscaling changed spec.replicas, by direction (up, down)",
    ["namespace", "service", "direction"],
)

#: Per-pod engine figures: status.metrics key -> gauge (health/aggregate.py service_metrics, per pod).
FIGURE_SERIES = {
    key: (f"ascend_operator_engine_{name}", help_text)
    for key, name, help_text in (
        ("tokensPerSecond", "tokens_per_second", "Generated tokens per second over the last 30 s"),
        ("runningRequests", "running_requests", "Requests in the engine's running batch at the last scrape"),
        ("waitingRequests", "waiting_requests", "Requests waiting for the engine at the last scrape"),
        ("kvCacheUsage", "kv_cache_usage", "KV-cache usage at the last scrape, 0-1 (highest DP rank)"),
        ("ttftP50Seconds", "ttft_p50_seconds", "Median time to first token over the last 30 s"),
        ("tpotP50Seconds", "tpot_p50_seconds", "Median time per output token over the last 30 s"),
    )
}
FIGURES = {key: Gauge(name, text, ["namespace", "service", "pod"]) for key, (name, text) in FIGURE_SERIES.items()}

PASS_SECONDS = Histogram(
    "ascend_operator_pass_duration_seconds",
    "Seconds one pass of a service's reconcile or health loop took",
    ["loop"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)

#: Series names of the operator as a whole (no namespace or service label).
FLEET_EXPORTED = frozenset(
    {
        *(f"ascend_operator_pass_duration_seconds{suffix}" for suffix in ("_bucket", "_count", "_sum")),
        "ascend_operator_npu_faults",
        "ascend_operator_node_unhealthy",
        "ascend_operator_chip_report_timestamp_seconds",
    }
)
#: Series names per service (counters with their `_total` suffix as scraped).
SERVICE_EXPORTED = frozenset(
    {
        "ascend_operator_rolls_total",
        "ascend_operator_rolls_refused_total",
        "ascend_operator_service_condition",
        "ascend_operator_engine_ready",
        "ascend_operator_engine_loading",
        "ascend_operator_canary_failures_total",
        "ascend_operator_router_admission_limit",
        "ascend_operator_router_ready_replicas",
        "ascend_operator_autoscaling_replicas",
        "ascend_operator_autoscaling_signal",
        "ascend_operator_autoscaling_decision",
        "ascend_operator_autoscaling_scales_total",
        *(name for name, _ in FIGURE_SERIES.values()),
    }
)
#: Every series name the operator exports.
EXPORTED = SERVICE_EXPORTED | FLEET_EXPORTED

Key = tuple[str, str]
#: Label values set per service and metric, so what is gone can be removed (prometheus-client keeps
#: every label set it ever saw otherwise).
_SERIES: dict[Key, dict[str, set[tuple[str, ...]]]] = {}
_METRICS: dict[str, Any] = {
    "rolls": ROLLS,
    "refused": REFUSED,
    "condition": SERVICE_CONDITION,
    "engine": ENGINE_READY,
    "loading": ENGINE_LOADING,
    "canary": CANARY_FAILURES,
    "admission": ROUTER_ADMISSION,
    "router": ROUTER_READY,
    "as_replicas": AUTOSCALING_REPLICAS,
    "as_signal": AUTOSCALING_SIGNAL,
    "as_decision": AUTOSCALING_DECISION,
    "as_scales": AUTOSCALING_SCALES,
    **{f"figure:{key}": gauge for key, gauge in FIGURES.items()},
}


def _track(key: Key, metric: str, labels: tuple[str, ...]) -> None:
    _SERIES.setdefault(key, {}).setdefault(metric, set()).add(labels)


def _drop(key: Key, metric: str, keep: Iterable[tuple[str, ...]]) -> None:
    """Remove the series of `metric` for this service that are not in `keep`."""
    kept = set(keep)
    known = _SERIES.get(key, {}).get(metric, set())
    for labels in known - kept:
        _METRICS[metric].remove(*labels)
    if key in _SERIES:
        _SERIES[key][metric] = known & kept


def start_service(namespace: str, service: str) -> None:
    """Create the service's roll counters at 0 (idempotent)."""
    key = (namespace, service)
    for reason in RollReason:
        ROLLS.labels(namespace, service, reason.value)
        _track(key, "rolls", (namespace, service, reason.value))
    for rule in ROLL_RULES:
        REFUSED.labels(namespace, service, rule)
        _track(key, "refused", (namespace, service, rule))


def record_roll(namespace: str, service: str, reason: RollReason) -> None:
    ROLLS.labels(namespace, service, reason.value).inc()
    _track((namespace, service), "rolls", (namespace, service, reason.value))


def record_refusal(namespace: str, service: str, rule: str) -> None:
    REFUSED.labels(namespace, service, rule).inc()
    _track((namespace, service), "refused", (namespace, service, rule))


def publish_conditions(namespace: str, service: str, conditions: Iterable[Mapping[str, Any]]) -> None:
    """Set the condition gauges from a computed status's conditions."""
    key = (namespace, service)
    current = []
    for cond in conditions:
        labels = (namespace, service, str(cond["type"]), str(cond["reason"]))
        SERVICE_CONDITION.labels(*labels).set(1.0 if cond["status"] == "True" else 0.0)
        _track(key, "condition", labels)
        current.append(labels)
    _drop(key, "condition", current)


def publish_engines(namespace: str, service: str, engines: Mapping[str, tuple[bool, str, bool]]) -> None:
    """Set each live pod's series (pod name -> (ready, reason, loading)); pods not given are dropped."""
    key = (namespace, service)
    current = []
    for pod, (ready, reason, loading) in engines.items():
        labels = (namespace, service, pod, reason)
        ENGINE_READY.labels(*labels).set(1.0 if ready else 0.0)
        _track(key, "engine", labels)
        current.append(labels)
        ENGINE_LOADING.labels(namespace, service, pod).set(1.0 if loading else 0.0)
        _track(key, "loading", (namespace, service, pod))
        CANARY_FAILURES.labels(namespace, service, pod)  # at 0 from the first pass: increase() sees the first
        _track(key, "canary", (namespace, service, pod))
    pods = [(namespace, service, pod) for pod in engines]
    _drop(key, "engine", current)
    _drop(key, "loading", pods)
    _drop(key, "canary", pods)


def publish_figures(namespace: str, service: str, figures: Mapping[str, Mapping[str, Any]]) -> None:
    """Set each live pod's engine figures (pod name -> status.metrics-style dict); a figure that is absent
    or None, and every pod not given, loses its series."""
    key = (namespace, service)
    for figure, gauge in FIGURES.items():
        current = []
        for pod, values in figures.items():
            value = values.get(figure)
            if value is None:
                continue
            labels = (namespace, service, pod)
            gauge.labels(*labels).set(float(value))
            _track(key, f"figure:{figure}", labels)
            current.append(labels)
        _drop(key, f"figure:{figure}", current)


def publish_router(namespace: str, service: str, router: RouterStatus | None) -> None:
    """The router's admission limits and ready pods; a service without a router has no series."""
    key = (namespace, service)
    if router is None:
        _drop(key, "admission", ())
        _drop(key, "router", ())
        return
    for limit, value in (("concurrent", router.max_concurrent_requests), ("queue", router.queue_size)):
        ROUTER_ADMISSION.labels(namespace, service, limit).set(float(value))
        _track(key, "admission", (namespace, service, limit))
    ROUTER_READY.labels(namespace, service).set(float(router.ready_replicas))
    _track(key, "router", (namespace, service))


def publish_autoscaling(
    namespace: str, service: str, status: AutoscalingStatus | None, *, bounds: tuple[int, int] = (0, 0)
) -> None:
    """spec.autoscaling's last decision (`bounds`: min and max replicas); None drops every series."""
    key = (namespace, service)
    if status is None:
        for metric in ("as_replicas", "as_signal", "as_decision", "as_scales"):
            _drop(key, metric, ())
        return
    replicas = {
        "desired": status.desired_replicas,
        "current": status.current_replicas,
        "min": bounds[0],
        "max": bounds[1],
        "ready": status.ready_replicas,
        "loading": status.loading_replicas,
    }
    for kind, value in replicas.items():
        AUTOSCALING_REPLICAS.labels(namespace, service, kind).set(float(value))
        _track(key, "as_replicas", (namespace, service, kind))
    signals = {
        "waiting_requests": status.waiting_requests,
        "running_requests": status.running_requests,
        "kv_cache_usage": status.kv_cache_usage,
        "ttft_p90_seconds": status.ttft_p90_seconds,
        "wanted_replicas": status.wanted_replicas,
    }
    current = []
    for signal, figure in signals.items():
        if figure is not None:
            AUTOSCALING_SIGNAL.labels(namespace, service, signal).set(float(figure))
            _track(key, "as_signal", (namespace, service, signal))
            current.append((namespace, service, signal))
    _drop(key, "as_signal", current)
    reason = (namespace, service, status.reason.value)
    AUTOSCALING_DECISION.labels(*reason).set(1.0)
    _track(key, "as_decision", reason)
    _drop(key, "as_decision", [reason])
    for direction in ("up", "down"):  # at 0 from the first decision: increase() sees the first scale
        AUTOSCALING_SCALES.labels(namespace, service, direction)
        _track(key, "as_scales", (namespace, service, direction))


def record_scale(namespace: str, service: str, *, up: bool) -> None:
    direction = "up" if up else "down"
    AUTOSCALING_SCALES.labels(namespace, service, direction).inc()
    _track((namespace, service), "as_scales", (namespace, service, direction))


def record_canary_failure(namespace: str, service: str, pod: str) -> None:
    CANARY_FAILURES.labels(namespace, service, pod).inc()
    _track((namespace, service), "canary", (namespace, service, pod))


def forget_service(namespace: str, service: str) -> None:
    """Remove every series of a service (it was deleted, or this operator stopped managing it)."""
    key = (namespace, service)
    for metric in list(_SERIES.get(key, {})):
        _drop(key, metric, ())
    _SERIES.pop(key, None)


def record_pass(loop: str, seconds: float) -> None:
    """One pass of a service's `loop` ("reconcile" or "health") took `seconds`."""
    PASS_SECONDS.labels(loop).observe(seconds)


def publish_chip_reports(reports: Iterable[NodeReport], *, now: float) -> None:
    """The fleet's NPU faults as the device plugin and NodeD report them (every node the caches hold), so an
    alert names node, chip and level even after the pod on the chip was rolled; cleared faults go. Each
    report's time goes too, so an alert sees a plugin that stopped writing (`time() - ...`)."""
    faults: set[tuple[str, ...]] = set()
    nodes: set[tuple[str, ...]] = set()
    stamps: dict[tuple[str, ...], float] = {}
    for report in reports:
        for fault in report.faults:
            faults.add((report.node, fault.chip, fault.level))
        if node_unhealthy(report, now=now) is not None:
            nodes.add((report.node,))
        if report.seen is not None:  # the operator's clock, as Prometheus' time(): a node's clock may be off
            stamps[(report.node,)] = report.seen
    for labels, stamp in stamps.items():
        CHIP_REPORT_TIME.labels(*labels).set(stamp)
    for labels in _CHIP_SERIES["stamps"] - set(stamps):
        CHIP_REPORT_TIME.remove(*labels)
    _CHIP_SERIES["stamps"] = set(stamps)
    for labels in faults:
        NPU_FAULTS.labels(*labels).set(1.0)
    for labels in nodes:
        NODE_UNHEALTHY.labels(*labels).set(1.0)
    for labels in _CHIP_SERIES["faults"] - faults:
        NPU_FAULTS.remove(*labels)
    for labels in _CHIP_SERIES["nodes"] - nodes:
        NODE_UNHEALTHY.remove(*labels)
    _CHIP_SERIES["faults"], _CHIP_SERIES["nodes"] = faults, nodes
