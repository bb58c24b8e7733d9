"""The drift detector judged against the pod's own baseline AND its service peers' current ratio: a slowdown
the whole service shares (the workload mix changed, the platform or a loaded host is slow) rolls nobody,
since a new pod would be as slow and rolling every pod is a storm; a pod slower than its peers still rolls.
Table tests on the pure detector (health/drift.py `detect_drift`, `peer_ratios`) and through the machine's
step, which is what controller/monitor.py runs with the peers it hands in."""

from dataclasses import replace

import pytest

from ascend_operator.api.health import DriftSpec, HealthSpec
from ascend_operator.health.drift import Baseline, DriftTracker, StepWindow, detect_drift, peer_ratios
from ascend_operator.health.judge import PodHealth
from ascend_operator.health.machine import Observations, RequestRoll, step
from ascend_operator.health.samples import EngineSample

#: The soak's windows (perf/soak.py): 15 s windows, 3 for a baseline, 90 s sustained (3 windows needed).
CFG = DriftSpec(warmup_seconds=60, sample_window_seconds=15, baseline_windows=3, sustain_seconds=90)
NOW = 1000.0
STEP = 0.040  # seconds per engine step at batch 4 when healthy


def tracker(slowdown: float | None, *, windows_in_span: int = 6, learned_at: float = 1.0) -> DriftTracker:
    """A pod with a learned baseline at batch 4 whose last 90 s of windows ran `slowdown` times the healthy
    step time; its baseline learned while the host ran `learned_at` times slower than healthy. None: a pod
    that has no comparable window yet (a successor still loading)."""
    base = STEP * learned_at
    baseline = Baseline(points={4: (base, base * 1.01, base * 0.99)}, learned_until=NOW - 200)
    if slowdown is None:
        return DriftTracker(baseline=Baseline())
    step = STEP * slowdown
    windows = tuple(StepWindow(t_end=NOW - 15 * i, batch=4, step_seconds=step) for i in range(windows_in_span))
    return DriftTracker(baseline=baseline, windows=windows)


# (case, this pod's slowdown, the peers' slowdowns or kinds without a comparable window, verdict reason)
TABLE: list[tuple[str, float, list[float | str], str]] = [
    ("this engine +50%, peers steady: its own fault", 1.5, [1.0], "ThroughputDrift"),
    ("everyone +50% (host or workload): nobody rolls", 1.5, [1.5], "ServiceWide"),
    ("everyone +50%, three peers", 1.5, [1.45, 1.55, 1.5], "ServiceWide"),
    ("this engine +50% beyond peers already +30%", 1.5 * 1.3, [1.3], "ThroughputDrift"),
    ("this +15%, peers +10%: within the threshold of them", 1.15, [1.10], "ServiceWide"),
    ("one slow peer does not shield the others: median", 1.5, [1.5, 1.0, 1.0], "ThroughputDrift"),
    ("one replica: no peer, its own baseline decides", 1.5, [], "ThroughputDrift"),
    ("the one peer is still learning: no verdict until it can say", 1.5, ["learning"], "PeersLearning"),
    ("the one peer is not Ready yet (a successor loading): no verdict", 1.5, ["starting"], "PeersLearning"),
    ("the one peer, Ready for long, is idle: its own baseline decides", 1.5, ["idle"], "ThroughputDrift"),
    ("one peer learning, one steady: judged against the steady one", 1.5, ["learning", 1.0], "ThroughputDrift"),
    ("one peer learning, one as slow: service-wide", 1.5, ["learning", 1.5], "ServiceWide"),
    ("this +5%, peers steady: within its baseline", 1.05, [1.0], "WithinBaseline"),
]


#: When each kind of peer without a comparable window became Ready: 10 s ago (inside the soak's 105 s
#: learning span), not yet, or long ago (then it is idle, not learning).
READY_SINCE = {"learning": NOW - 10, "starting": None, "idle": 0.0}


@pytest.mark.parametrize(("case", "mine", "peers", "reason"), TABLE, ids=[row[0] for row in TABLE])
def test_drift_against_own_baseline_and_peers(case: str, mine: float, peers: list[float | str], reason: str) -> None:
    trackers = {"me": tracker(mine)}
    since: dict[str, float | None] = {"me": 0.0}
    for i, p in enumerate(peers):
        trackers[f"peer{i}"] = tracker(p if isinstance(p, float) else None)
        since[f"peer{i}"] = READY_SINCE[p] if isinstance(p, str) else 0.0
    ratios = peer_ratios(trackers, "me", now=NOW, cfg=CFG, ready_since=since)
    assert len(ratios) == len([p for p in peers if p != "idle"])
    me = trackers["me"]
    finding = detect_drift(me.baseline, me.windows, now=NOW, cfg=CFG, peers=ratios)
    assert finding.reason == reason, (case, finding.message)
    assert finding.drifted is (reason == "ThroughputDrift")


def test_peers_are_compared_by_their_step_time_now_not_by_their_own_baselines() -> None:
    """The soak's false roll: a successor learned its baseline while the host was quick, its peer learned its
    own while the host was 30% slower; now both run 13% over the quick baseline. Against its own baseline the
    peer reads -13%, and the pod would roll; against the pod's baseline the peer's steps are as slow as the
    pod's, and nobody rolls."""
    trackers = {"me": tracker(1.13), "peer": tracker(1.13, learned_at=1.3)}
    ratios = peer_ratios(trackers, "me", now=NOW, cfg=CFG, ready_since=dict.fromkeys(trackers, 0.0))
    assert ratios == pytest.approx((1.13,), rel=0.02)
    me = trackers["me"]
    finding = detect_drift(me.baseline, me.windows, now=NOW, cfg=CFG, peers=ratios)
    assert finding.reason == "ServiceWide", finding.message


def test_a_peer_with_one_busy_window_in_the_span_still_counts() -> None:
    """A P/D decode engine's busy windows are rarer: one is enough to say the service is slower (the soak
    rolled both decode engines of a pair, each 25% slower, for want of a peer with three)."""
    trackers = {"me": tracker(1.25), "peer": tracker(1.25, windows_in_span=1)}
    finding = detect_drift(
        trackers["me"].baseline,
        trackers["me"].windows,
        now=NOW,
        cfg=CFG,
        peers=peer_ratios(trackers, "me", now=NOW, cfg=CFG, ready_since=dict.fromkeys(trackers, 0.0)),
    )
    assert finding.reason == "ServiceWide"


@pytest.mark.parametrize(("peers", "rolls"), [((1.0,), True), ((1.5,), False)])
def test_the_machine_rolls_only_a_pod_slower_than_its_peers(peers: tuple[float, ...], rolls: bool) -> None:
    """Through `step` as the monitor runs it: a Ready pod 50% slower than its baseline asks for a
    ThroughputDrift roll only when its peers are not as slow; when they are, it stays Ready and unrolled."""
    cfg = HealthSpec(drift=CFG)
    before = EngineSample(t=NOW - 1, running=4, generation_tokens=1000.0, iterations=250.0)
    state = replace(
        PodHealth(), samples=(before,), drift=tracker(1.5), ready_since=0.0, served=True, last_canary=NOW - 1,
        mismatches=(),
    )  # fmt: skip
    scrape = replace(before, t=NOW, generation_tokens=1100.0, iterations=275.0)  # it generates, slowly
    _, verdict, actions = step(state, Observations(sample=scrape, peers=peers), now=NOW, cfg=cfg)
    assert verdict.ready
    assert any(isinstance(a, RequestRoll) for a in actions) is rolls, verdict
    assert verdict.reason == ("ThroughputDrift" if rolls else "CanaryPassing")
