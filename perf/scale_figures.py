"""Pure arithmetic of the scale benchmark (perf/scale.py): API request rates, CPU, RSS, latency, the table.

Why a module of its own: the figures docs/scale.md's table reports must be right whatever the run
looked like, so everything between raw readings (the API server's /metrics text, /proc files, timestamps)
and the printed table is a pure function here, tested on fixed inputs (tests/perf/test_scale_figures.py);
perf/scale.py only takes the readings.

Request rates come from the API server's own `apiserver_request_total` (kube-apiserver counts every
request when it completes, labelled verb / resource / subresource among others; long-running WATCHes
count when they end). That counter has no client label, so the operator's share is the rate with the
operator running minus the rate of a baseline window in the same cluster with the operator stopped (KWOK's
node heartbeats, the shared simulator's pod listing, the controllers); both are kept in the JSON. Only
resources the operator's RBAC grants count as its share (OPERATOR_RESOURCES): a lease renewal or a node
heartbeat that happened to be more frequent in one window than in the baseline is never the operator's.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

#: (verb, resource, subresource) as apiserver_request_total labels them; subresource "" for the object.
Key = tuple[str, str, str]
STATUS_WRITE_VERBS = ("PATCH", "PUT")
#: What the operator may touch: the resources of its ClusterRole (charts/ascend-inference-operator/templates/
#: rbac.yaml), plus "" for non-resource URLs (kopf's API discovery).
OPERATOR_RESOURCES = frozenset(
    {
        "ascendinferenceservices", "pods", "services", "networkpolicies", "secrets", "poddisruptionbudgets",
        "events", "leaderworkersets", "inferencepools", "customresourcedefinitions", "clusterkopfpeerings", "",
    }
)  # fmt: skip
AIS_RESOURCE = "ascendinferenceservices"
#: Requests on granted resources that are never the operator's: it posts events only through kopf, which
#: creates a new Event each time (kopf/_cogs/clients/events.py post_event) and never patches one, while
#: kube-controller-manager patches its repeated warnings (locally: the endpoint controllers refusing the
#: 127.x pod IPs, ~1100 events for 50 services), so a PATCH on events is theirs.
NEVER_OPERATOR = frozenset({("PATCH", "events", "")})


def request_counts(metrics_text: str) -> dict[Key, float]:
    """apiserver_request_total summed over every label but verb, resource and subresource."""
    counts: dict[Key, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            labels = sample.labels
            key = (labels.get("verb", ""), labels.get("resource", ""), labels.get("subresource", ""))
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def rates(before: Mapping[Key, float], after: Mapping[Key, float], seconds: float) -> dict[Key, float]:
    """Requests per second by key over a window (keys that did not move are left out)."""
    out = {key: (after[key] - before.get(key, 0.0)) / seconds for key in after}
    return {key: rate for key, rate in out.items() if rate > 0}


def minus(rates_with: Mapping[Key, float], baseline: Mapping[Key, float]) -> dict[Key, float]:
    """The operator's share: on the resources it may touch, the rate with it minus the baseline without it."""
    out = {
        key: rate - baseline.get(key, 0.0)
        for key, rate in rates_with.items()
        if key[1] in OPERATOR_RESOURCES and key not in NEVER_OPERATOR
    }
    return {key: rate for key, rate in out.items() if rate > 1e-9}


def status_writes_per_service_minute(operator_rates: Mapping[Key, float], services: int) -> float:
    """PATCH/PUT on ascendinferenceservices/status, per service per minute."""
    per_s = sum(operator_rates.get((verb, AIS_RESOURCE, "status"), 0.0) for verb in STATUS_WRITE_VERBS)
    return per_s * 60.0 / services


def label(key: Key) -> str:
    """`LIST pods`, `PATCH ascendinferenceservices/status`."""
    verb, resource, sub = key
    return f"{verb} {resource or '(non-resource)'}{'/' + sub if sub else ''}"


def top_callers(operator_rates: Mapping[Key, float], n: int = 3) -> list[tuple[str, float]]:
    """The n biggest keys, largest first."""
    ranked = sorted(operator_rates.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(label(key), rate) for key, rate in ranked[:n]]


def cpu_seconds(stat_text: str, clock_ticks: int) -> float:
    """utime + stime of /proc/<pid>/stat (fields 14 and 15), in seconds."""
    fields = stat_text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / clock_ticks


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def latencies(created: Mapping[str, float], bound: Mapping[str, float]) -> list[float]:
    """Seconds from each object's create call to its pod being seen bound; an object never bound is an error."""
    missing = sorted(set(created) - set(bound))
    if missing:
        raise ValueError(f"never bound: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    return [bound[name] - created[name] for name in created]


#: loop -> cumulative buckets of `ascend_operator_pass_duration_seconds` (upper bound, passes at or below).
PassHistogram = dict[str, list[tuple[float, float]]]


def pass_histogram(metrics_text: str) -> PassHistogram:
    """The operator's pass-duration histogram from its /metrics, per loop."""
    out: PassHistogram = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "ascend_operator_pass_duration_seconds":
            continue
        for s in family.samples:
            if s.name.endswith("_bucket"):
                out.setdefault(s.labels["loop"], []).append((float(s.labels["le"]), s.value))
    return {loop: sorted(buckets) for loop, buckets in out.items()}


def pass_quantile(before: PassHistogram, after: PassHistogram, loop: str, q: float) -> float | None:
    """The q-quantile (0..1) of the passes of `loop` between two readings, interpolated inside its bucket
    as Prometheus' histogram_quantile does (the +Inf bucket answers its lower bound); None: no pass."""
    old = dict(before.get(loop, []))
    counts = [(le, n - old.get(le, 0.0)) for le, n in after.get(loop, [])]
    total = counts[-1][1] if counts else 0.0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, n in counts:
        if n >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (rank - below) / (n - below) if n > below else le
        lower, below = le, n
    return lower


@dataclass(frozen=True)
class Window:
    """What one steady window measured."""

    seconds: float
    operator_cores: float
    operator_rss_mb: float
    requests_per_s: float
    """Operator's API requests per second (baseline subtracted)."""
    status_writes: float
    """Per service per minute."""
    callers: tuple[tuple[str, float], ...]


def window(
    *,
    seconds: float,
    cpu_delta: float,
    rss: int,
    counts_before: Mapping[Key, float],
    counts_after: Mapping[Key, float],
    baseline: Mapping[Key, float],
    services: int,
) -> tuple[Window, dict[Key, float]]:
    """The window's figures and the operator's rates by key."""
    own = minus(rates(counts_before, counts_after, seconds), baseline)
    figures = Window(
        seconds=seconds,
        operator_cores=cpu_delta / seconds,
        operator_rss_mb=rss / 1e6,
        requests_per_s=sum(own.values()),
        status_writes=status_writes_per_service_minute(own, services),
        callers=tuple(top_callers(own)),
    )
    return figures, own


def rewindow(figures: Mapping[str, object], operator_rates: Mapping[str, float]) -> Window:
    """A saved window's figures with the operator's share taken again from its saved rates (so a results
    file from before a NEVER_OPERATOR rule is read as today's code would have measured it)."""
    never = {label(key) for key in NEVER_OPERATOR}
    own = {name: rate for name, rate in operator_rates.items() if name not in never}
    ranked = sorted(own.items(), key=lambda kv: -kv[1])[:3]
    return Window(
        seconds=float(figures["seconds"]),  # type: ignore[arg-type]
        operator_cores=float(figures["operator_cores"]),  # type: ignore[arg-type]
        operator_rss_mb=float(figures["operator_rss_mb"]),  # type: ignore[arg-type]
        requests_per_s=sum(own.values()),
        status_writes=float(figures["status_writes"]),  # type: ignore[arg-type]
        callers=tuple(ranked),
    )


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


@dataclass(frozen=True, kw_only=True)
class Reaction:
    """A new service on the running fleet against a direct pod create beside it: p50s (seconds) of one
    run's probes, and the ratios the issue's target reads."""

    cr: float
    """The CR's create call -> its pod bound."""
    stored: float
    """The CR stored (its create call returned) -> its pod bound: the operator's share and its pod's."""
    cr_call: float
    """The CR's own create call: the API server storing it, before any operator can know of it."""
    direct: float
    """A direct pod create call -> that pod bound (the limit)."""

    @property
    def ratio(self) -> float:
        """From the CR's create call, as the target is written."""
        return self.cr / self.direct

    @property
    def ratio_stored(self) -> float:
        """From the CR stored."""
        return self.stored / self.direct

    @property
    def floor(self) -> float:
        """`ratio` for an operator that took no time at all: the CR's write, then its pod's as direct."""
        return (self.cr_call + self.direct) / self.direct


def reaction(cr: Sequence[float], cr_call: Sequence[float], direct: Sequence[float]) -> Reaction:
    """One run's probes as p50s; probe i's CR and its create call are paired (the share after the CR's own
    write is taken probe by probe)."""
    return Reaction(
        cr=percentile(cr, 50),
        stored=percentile([total - call for total, call in zip(cr, cr_call, strict=True)], 50),
        cr_call=percentile(cr_call, 50),
        direct=percentile(direct, 50),
    )


@dataclass(frozen=True)
class Row:
    """One line of the table: a service count and a mode (idle or load), medians over the runs."""

    services: int
    mode: str
    runs: int
    operator_cores: float
    operator_rss_mb: float
    requests_per_s: float
    status_writes: float
    callers: tuple[tuple[str, float], ...]
    cr_to_bound_p50: float
    direct_p50: float
    cr_to_bound_max: float
    direct_max: float
    ready: int
    """Services Ready when the windows began (the fewest over the runs)."""


def row(
    services: int,
    mode: str,
    windows: Sequence[Window],
    cr: Sequence[Sequence[float]],
    direct: Sequence[Sequence[float]],
    *,
    ready: int,
) -> Row:
    """Medians over runs: of each window's figures, and of each run's p50 and max create latency."""
    return Row(
        services=services,
        mode=mode,
        runs=len(windows),
        operator_cores=median(w.operator_cores for w in windows),
        operator_rss_mb=median(w.operator_rss_mb for w in windows),
        requests_per_s=median(w.requests_per_s for w in windows),
        status_writes=median(w.status_writes for w in windows),
        callers=sorted(windows, key=lambda w: w.requests_per_s)[len(windows) // 2].callers,  # the median run's
        cr_to_bound_p50=median(percentile(run, 50) for run in cr),
        direct_p50=median(percentile(run, 50) for run in direct),
        cr_to_bound_max=median(max(run) for run in cr),
        direct_max=median(max(run) for run in direct),
        ready=ready,
    )


HEADER = (
    "| services | load | runs | operator CPU (cores) | RSS (MB) | API req/s (per service) | status writes /service/min "
    "| biggest callers (req/s) | CR -> pod bound p50 / max (s) | direct create p50 / max (s) |"
)


def markdown(rows: Sequence[Row]) -> str:
    """The docs/scale.md table."""
    lines = [HEADER, "|" + "---|" * 10]
    for r in rows:
        count = f"{r.services} ({r.ready} Ready)" if r.ready < r.services else str(r.services)
        callers = ", ".join(f"{name} {rate:.2f}" for name, rate in r.callers) or "-"
        lines.append(
            f"| {count} | {r.mode} | {r.runs} | {r.operator_cores:.3f} | {r.operator_rss_mb:.0f} "
            f"| {r.requests_per_s:.1f} ({r.requests_per_s / r.services:.2f}) | {r.status_writes:.2f} | {callers} "
            f"| {r.cr_to_bound_p50:.2f} / {r.cr_to_bound_max:.2f} | {r.direct_p50:.2f} / {r.direct_max:.2f} |"
        )
    return "\n".join(lines)
