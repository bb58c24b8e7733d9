"""The scale benchmark's arithmetic: what the README's Scale table reports from the raw readings."""

from __future__ import annotations

import pytest

from harness.procs import rss_bytes
from perf import scale_figures as fig

HEAD = (
    "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run "
    "value, group, version, resource, scope, component, and HTTP response code.\n"
    "# TYPE apiserver_request_total counter\n"
)


def metrics(list_pods: float, patch_status: float, conflicts: float, leases: float) -> str:
    """kube-apiserver's /metrics as it renders the counter (plus a histogram that must be ignored)."""
    ais = 'group="inference.ascend.dev",resource="ascendinferenceservices",scope="namespace",subresource="status"'
    return (
        HEAD + f'apiserver_request_total{{code="200",component="apiserver",dry_run="",group="",resource="pods",'
        f'scope="namespace",subresource="",verb="LIST",version="v1"}} {list_pods}\n'
        f'apiserver_request_total{{code="200",component="apiserver",dry_run="",{ais},verb="PATCH",'
        f'version="v1alpha1"}} {patch_status}\n'
        f'apiserver_request_total{{code="409",component="apiserver",dry_run="",{ais},verb="PATCH",'
        f'version="v1alpha1"}} {conflicts}\n'
        f'apiserver_request_total{{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",'
        f'resource="leases",scope="namespace",subresource="",verb="PUT",version="v1"}} {leases}\n'
        "# HELP apiserver_request_duration_seconds x\n# TYPE apiserver_request_duration_seconds histogram\n"
        'apiserver_request_duration_seconds_bucket{resource="pods",verb="LIST",le="+Inf"} 999\n'
        'apiserver_request_duration_seconds_count{resource="pods",verb="LIST"} 999\n'
        'apiserver_request_duration_seconds_sum{resource="pods",verb="LIST"} 9\n'
    )


def test_request_counts_sum_every_code_by_verb_resource_and_subresource() -> None:
    assert fig.request_counts(metrics(10, 5, 1, 7)) == {
        ("LIST", "pods", ""): 10.0,
        ("PATCH", "ascendinferenceservices", "status"): 6.0,
        ("PUT", "leases", ""): 7.0,
    }


def test_a_window_reports_the_operators_share_above_the_baseline() -> None:
    """30 services for 60 s: 600 pod LISTs and 180 status PATCHes (one 409 among them), and lease renewals
    at more than the baseline's rate, which belong to KWOK and so are never the operator's."""
    before = fig.request_counts(metrics(100, 50, 0, 1000))
    after = fig.request_counts(metrics(700, 229, 1, 1600))
    baseline = {("PUT", "leases", ""): 8.0, ("LIST", "pods", ""): 1.0}  # the simulator's pod listing, 1/s
    window, own = fig.window(
        seconds=60.0, cpu_delta=15.0, rss=102_000_000, counts_before=before, counts_after=after,
        baseline=baseline, services=30,
    )  # fmt: skip
    assert own == {("LIST", "pods", ""): 9.0, ("PATCH", "ascendinferenceservices", "status"): 3.0}
    assert window == fig.Window(
        seconds=60.0,
        operator_cores=0.25,
        operator_rss_mb=102.0,
        requests_per_s=12.0,
        status_writes=6.0,  # 3 writes/s x 60 s / 30 services
        callers=(("LIST pods", 9.0), ("PATCH ascendinferenceservices/status", 3.0)),
    )


def test_proc_readings() -> None:
    stat = "4242 (python -m ascend) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 3 0 100 1 1"
    assert fig.cpu_seconds(stat, clock_ticks=100) == 3.0  # utime 250 + stime 50 ticks
    assert rss_bytes("Name:\tpython\nVmRSS:\t  102400 kB\nThreads:\t3\n") == 104_857_600
    with pytest.raises(ValueError, match="VmRSS"):
        rss_bytes("Name:\tpython\nState:\tZ (zombie)\n")


def test_latency_is_per_object_and_an_object_never_bound_fails_the_run() -> None:
    assert fig.latencies({"a": 1.0, "b": 2.0}, {"a": 1.5, "b": 4.0, "other": 9.0}) == [0.5, 2.0]
    with pytest.raises(ValueError, match="never bound: b"):
        fig.latencies({"a": 1.0, "b": 2.0}, {"a": 1.5})
    assert fig.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert fig.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert fig.percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0


def test_a_row_takes_medians_over_the_runs_and_prints_per_service_figures() -> None:
    def w(cores: float, req: float) -> fig.Window:
        return fig.Window(
            seconds=60, operator_cores=cores, operator_rss_mb=100 + cores, requests_per_s=req,
            status_writes=req / 10, callers=(("LIST pods", req / 2),),
        )  # fmt: skip

    cr = [[1.0, 2.0, 9.0], [1.2, 1.4, 3.0], [0.8, 1.0, 30.0]]  # p50s 2.0 / 1.4 / 1.0, maxima 9 / 3 / 30
    direct = [[0.5, 0.6, 0.7], [0.4, 0.5, 0.6], [0.6, 0.7, 0.8]]
    r = fig.row(30, "idle", [w(0.2, 40.0), w(0.3, 50.0), w(0.25, 45.0)], cr, direct, ready=30)
    assert r == fig.Row(
        services=30, mode="idle", runs=3, operator_cores=0.25, operator_rss_mb=100.25, requests_per_s=45.0,
        status_writes=4.5, callers=(("LIST pods", 22.5),), cr_to_bound_p50=1.4, direct_p50=0.6,
        cr_to_bound_max=9.0, direct_max=0.7, ready=30,
    )  # fmt: skip
    table = fig.markdown([r]).splitlines()
    assert table[0] == fig.HEADER
    assert table[2] == (
        "| 30 | idle | 3 | 0.250 | 100 | 45.0 (1.50) | 4.50 | LIST pods 22.50 | 1.40 / 9.00 | 0.60 / 0.70 |"
    )
    # a run whose services were not all Ready when the windows began says so
    partial = fig.markdown([fig.Row(**{**r.__dict__, "ready": 17})]).splitlines()[2]
    assert partial.startswith("| 30 (17 Ready) | idle | 3 |")


def test_patched_events_are_never_the_operators_and_saved_runs_are_read_the_same_way() -> None:
    """kube-controller-manager patches its repeated warnings (the local 127.x pod IPs); kopf only posts."""
    rates = {
        ("PATCH", "events", ""): 7.8,
        ("POST", "events", ""): 0.4,
        ("PATCH", "ascendinferenceservices", "status"): 1.1,
    }
    own = fig.minus(rates, {})
    assert own == {("POST", "events", ""): 0.4, ("PATCH", "ascendinferenceservices", "status"): 1.1}
    saved = {
        "seconds": 60.0,
        "operator_cores": 0.2,
        "operator_rss_mb": 130.0,
        "requests_per_s": 9.3,
        "status_writes": 1.3,
    }
    window = fig.rewindow(saved, {fig.label(k): r for k, r in rates.items()})
    assert window.requests_per_s == pytest.approx(1.5)
    assert window.callers == (("PATCH ascendinferenceservices/status", 1.1), ("POST events", 0.4))


def _passes(health: dict[str, float]) -> str:
    lines = ["# TYPE ascend_operator_pass_duration_seconds histogram"]
    bucket = "ascend_operator_pass_duration_seconds_bucket"
    lines += [f'{bucket}{{le="{le}",loop="health"}} {n}' for le, n in health.items()]
    lines += [
        f'ascend_operator_pass_duration_seconds_count{{loop="health"}} {health["+Inf"]}',
        'ascend_operator_pass_duration_seconds_sum{loop="health"} 1.0',
    ]
    return "\n".join(lines) + "\n"


def test_pass_quantiles_are_read_from_the_operators_histogram_between_two_readings() -> None:
    before = fig.pass_histogram(_passes({"0.1": 10, "1.0": 10, "5.0": 10, "+Inf": 10}))
    # in the window: 10 passes, 4 at or under 0.1 s, 4 in (0.1, 1], 2 in (1, 5]
    after = fig.pass_histogram(_passes({"0.1": 14, "1.0": 18, "5.0": 20, "+Inf": 20}))
    assert fig.pass_quantile(before, after, "health", 0.5) == pytest.approx(0.1 + 0.9 * (5 - 4) / 4)
    assert fig.pass_quantile(before, after, "health", 0.9) == pytest.approx(1.0 + 4.0 * (9 - 8) / 2)
    assert fig.pass_quantile(before, after, "reconcile", 0.5) is None  # no pass of that loop
    assert fig.pass_quantile(after, after, "health", 0.5) is None  # none in the window
    beyond = fig.pass_histogram(_passes({"0.1": 14, "1.0": 18, "5.0": 18, "+Inf": 20}))
    assert fig.pass_quantile(before, beyond, "health", 0.95) == 5.0  # past the last finite bound: that bound


def test_reaction_ratios_read_the_probes_side_by_side() -> None:
    # three probes: CR create call -> bound, of which the CR's own create call, and a direct create -> bound
    timed = fig.reaction(cr=[0.070, 0.060, 0.090], cr_call=[0.020, 0.010, 0.030], direct=[0.030, 0.040, 0.020])
    assert (timed.cr, timed.stored, timed.cr_call, timed.direct) == (0.070, 0.050, 0.020, 0.030)
    assert timed.ratio == pytest.approx(0.070 / 0.030)
    assert timed.ratio_stored == pytest.approx(0.050 / 0.030)
    # an operator that took no time would still score the CR's write on top of its pod's: 1.67x here
    assert timed.floor == pytest.approx((0.020 + 0.030) / 0.030)


def test_reaction_needs_every_probe_paired() -> None:
    with pytest.raises(ValueError, match="shorter"):
        fig.reaction(cr=[0.07, 0.06], cr_call=[0.02], direct=[0.03, 0.04])
