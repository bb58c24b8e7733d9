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


# (case, this pod's slowdown, the peers' slowdowns, verdict reason)
TABLE = [
    ("this engine +50%, peers steady: its own fault", 1.5, [1.0], "ThroughputDrift"),
    ("everyone +50% (host or workload): nobody rolls", 1.5, [1.5], "ServiceWide"),
    ("everyone +50%, three peers", 1.5, [1.45, 1.55, 1.5], "ServiceWide"),
    ("this engine +50% beyond peers already +30%", 1.5 * 1.3, [1.3], "ThroughputDrift"),
    ("this +15%, peers +10%: within the threshold of them", 1.15, [1.10], "ServiceWide"),
    ("one slow peer does not shield the others: median", 1.5, [1.5, 1.0, 1.0], "ThroughputDrift"),
    ("one replica: no peer, its own baseline decides", 1.5, [], "ThroughputDrift"),
    ("the one peer is still learning: no verdict until it can say", 1.5, [None], "PeersLearning"),
    ("one peer learning, one steady: judged against the steady one", 1.5, [None, 1.0], "ThroughputDrift"),
    ("one peer learning, one as slow: service-wide", 1.5, [None, 1.5], "ServiceWide"),
    ("this +5%, peers steady: within its baseline", 1.05, [1.0], "WithinBaseline"),
]


@pytest.mark.parametrize(("case", "mine", "peers", "reason"), TABLE, ids=[row[0] for row in TABLE])
def test_drift_against_own_baseline_and_peers(case: str, mine: float, peers: list[float | None], reason: str) -> None:
    trackers = {"me": tracker(mine), **{f"peer{i}": tracker(p) for i, p in enumerate(peers)}}
    ratios = peer_ratios(trackers, "me", now=NOW, cfg=CFG)
    assert len(ratios) == len(peers)
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
    ratios = peer_ratios(trackers, "me", now=NOW, cfg=CFG)
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
        peers=peer_ratios(trackers, "me", now=NOW, cfg=CFG),
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
