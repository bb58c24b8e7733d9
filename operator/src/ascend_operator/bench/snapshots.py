"""Engine /metrics snapshots and the deltas a benchmark reads from them (pure: text in, numbers out).

Why this module exists: the seed's second rule is that TTFT and TPOT come from the engine's own histograms,
not from client-side stream timing (docs/FACTS.md benchmark pitfall 2: client first-chunk TTFT read 8.5-12 s
while the engine's read 1.09-1.89 s). Every figure the bench takes from the engine is a difference between
two scrapes, and a counter that went down between them means the engine restarted during the run, which
voids the run (pitfall 4). Names come from the engine contract (`ascend_operator.contract.vllm_metrics`, each
entry held against vLLM 0.25.1's vllm/v1/metrics/loggers.py by tests/contract/): counters are exposed by
prometheus-client with a `_total` suffix, histograms as `_sum` / `_count` / `_bucket`. Quantiles are the
health package's (`ascend_operator.health.rates.quantile`, Prometheus' histogram_quantile), so the bench
and the operator read one histogram the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from ascend_operator.contract import vllm_metrics as M
from ascend_operator.health.rates import quantile


def _counter(metric: M.Metric) -> str:
    """The sample name prometheus-client exposes for a counter."""
    if metric.type is not M.MetricType.COUNTER:
        raise ValueError(f"{metric.name} is a {metric.type}, not a counter")
    return metric.name + "_total"


# Sample names the bench reads; histograms by family name (`histogram_delta` adds the suffixes).
TTFT = M.TIME_TO_FIRST_TOKEN.name
TPOT = M.TIME_PER_OUTPUT_TOKEN.name
PREFIX_QUERIES = _counter(M.PREFIX_CACHE_QUERIES)
PREFIX_HITS = _counter(M.PREFIX_CACHE_HITS)
REQUEST_SUCCESS = _counter(M.REQUEST_SUCCESS)
PREEMPTIONS = _counter(M.NUM_PREEMPTIONS)
GENERATION_TOKENS = _counter(M.GENERATION_TOKENS)
PROMPT_TOKENS = _counter(M.PROMPT_TOKENS)
KV_USAGE = M.KV_CACHE_USAGE.name
RUNNING = M.NUM_REQUESTS_RUNNING.name
#: Not vLLM's: prometheus-client's process collector, on by default in the engine's registry.
PROCESS_START = "process_start_time_seconds"

_MONOTONE_SUFFIXES = ("_total", "_count", "_sum", "_bucket")

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Snapshot:
    """One scrape: every sample by (name, sorted labels)."""

    series: Mapping[SeriesKey, float]

    def total(self, name: str, **match: str) -> float:
        """The sum of a sample name over all series whose labels include `match`."""
        return sum(
            value
            for (sample, labels), value in self.series.items()
            if sample == name and all((k, v) in labels for k, v in match.items())
        )

    def per_engine(self, name: str) -> dict[str, float]:
        """By engine label (`scrape/engine` in a merged snapshot of several pods)."""
        out: dict[str, float] = {}
        for (sample, labels), value in self.series.items():
            if sample == name:
                label = dict(labels)
                engine = label.get("engine", "")
                key = f"{label['scrape']}/{engine}" if "scrape" in label else engine
                out[key] = out.get(key, 0.0) + value
        return out

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for (sample, labels) in self.series if sample == name]

    def buckets(self, name: str) -> dict[float, float]:
        """Cumulative bucket counts of a histogram by upper bound, summed over engines."""
        out: dict[float, float] = {}
        for (sample, labels), value in self.series.items():
            if sample == name + "_bucket":
                le = float(dict(labels)["le"])
                out[le] = out.get(le, 0.0) + value
        return out


def parse_metrics(text: str) -> Snapshot:
    series: dict[SeriesKey, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            series[key] = series.get(key, 0.0) + float(sample.value)
    return Snapshot(series)


def merge(snapshots: Sequence[Snapshot]) -> Snapshot:
    """Several pods' scrapes as one (a Service's requests land on any of them); each series gets a
    `scrape` label with the pod's index so nothing collides."""
    if len(snapshots) == 1:
        return snapshots[0]
    series: dict[SeriesKey, float] = {}
    for i, snap in enumerate(snapshots):
        for (name, labels), value in snap.series.items():
            series[(name, tuple(sorted((*labels, ("scrape", str(i))))))] = value
    return Snapshot(series)


def delta(before: Snapshot, after: Snapshot, name: str, **match: str) -> float:
    return after.total(name, **match) - before.total(name, **match)


def resets(before: Snapshot, after: Snapshot) -> list[str]:
    """Monotone series that went down or vanished between two scrapes, and a changed process start time:
    each is evidence that the engine restarted in between."""
    found: list[str] = []
    for key, value in before.series.items():
        name, labels = key
        if not name.endswith(_MONOTONE_SUFFIXES) or name.endswith("_created"):
            continue
        later = after.series.get(key)
        if later is None or later < value - 1e-9:
            label_text = ",".join(f"{k}={v}" for k, v in labels if k != "le")
            found.append(f"{name}{{{label_text}}} {value:g} -> {'absent' if later is None else f'{later:g}'}")
    start0, start1 = before.total(PROCESS_START), after.total(PROCESS_START)
    if start0 and start1 and abs(start1 - start0) > 1e-6:
        found.append(f"{PROCESS_START} {start0:.0f} -> {start1:.0f}")
    return found


@dataclass(frozen=True)
class HistogramDelta:
    """A histogram's observations between two scrapes."""

    count: float
    sum: float
    buckets: Mapping[float, float]  # cumulative, by upper bound

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """Prometheus `histogram_quantile` over these observations (`ascend_operator.health.rates.quantile`)."""
        return quantile(tuple(sorted(self.buckets.items())), q)


def histogram_delta(before: Snapshot, after: Snapshot, name: str) -> HistogramDelta:
    b0, b1 = before.buckets(name), after.buckets(name)
    return HistogramDelta(
        count=delta(before, after, name + "_count"),
        sum=delta(before, after, name + "_sum"),
        buckets={le: b1[le] - b0.get(le, 0.0) for le in b1},
    )


def cache_config(snapshot: Snapshot) -> dict[str, str]:
    """The labels of `vllm:cache_config_info` (CacheConfig.metrics_info(), one series per engine)."""
    infos = snapshot.labels_of(M.CACHE_CONFIG_INFO.name)
    if not infos:
        return {}
    return {k: v for k, v in sorted(infos[0].items()) if k not in ("engine", "model_name")}
