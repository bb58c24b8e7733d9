"""Drift detection: engine step time at comparable batch sizes against a per-pod baseline.

Why step time: tokens/s swings with load (C1 66.5 -> C32 583.5 tok/s in the seed's sweep) and with
speculative acceptance (45% synthetic vs 16.6% on real traffic changes tokens per step, not the time of a
step), while the time of one engine step at a given batch size is what a degrading engine (the seed's
~18% loss with unreaped workers) makes longer. Windows are "busy" (requests running at every scrape) and
decode-dominated (prefill-heavy windows mix in 8192-token chunks and are skipped). The baseline is learned
per batch size (mean running requests, rounded) after warm-up; unseen batch sizes are interpolated
between learned neighbours no more than 2x apart, or not judged. Pure.

Prefill in a window: vLLM 0.25.1 exports no count of the prefill tokens a step computes. Prompt tokens, and
the prompt part of `vllm:iteration_tokens_total`'s sum, are added only when a request's prefill completes
(vllm/v1/metrics/stats.py:304-306 and 363-366; loggers.py:1168-1171), so a window in which an 8192-token
chunk runs in every step beside decodes shows no prompt tokens until that prompt is done. What does show:
the prefilling request is running but returns nothing. Every decoding request returns exactly one token a step
plus its accepted drafts (vllm/v1/core/sched/scheduler.py:1593-1595), so generated minus accepted tokens are
the request-steps that decoded, and the running requests beyond them per step are requests in prefill (or
otherwise returning nothing). Both tests are kept: prompt tokens catch prefills that complete in the window.

Peers: a pod's own baseline cannot tell its engine getting slower from everything getting slower (the workload
mix changed, the platform or the host is slow). Rolling a pod then does not help, and rolling every pod of the
service is a storm made by us. So a pod drifts only if its ratio also exceeds its service peers' current ratio
(the peers' step times over the same span, against this pod's baseline at the same batch sizes) by the
threshold: a service-wide slowdown rolls nobody. A pod with peers none of which has a comparable window yet
(successors still loading) is not judged until one has: a drift is not urgent, and alone the pod cannot tell
its slowness from the host's (the soak's false rolls were all of pods whose one peer had just been replaced).
A pod with no peer at all (one replica) is judged on its own baseline.
"""

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ascend_operator.api.health import DriftSpec
from ascend_operator.api.reasons import DetectorFinding
from ascend_operator.health.samples import EngineSample

#: Above this many prompt tokens per engine step (prefills that completed) a window is not comparable.
MAX_PROMPT_TOKENS_PER_STEP = 256.0
#: From this many running requests per engine step that returned no token (a prefill chunk in most steps) a
#: window is not comparable: one 8192-token chunk makes a step take seconds instead of tens of milliseconds.
MAX_SILENT_REQUESTS_PER_STEP = 0.5
#: Interpolate a baseline only between learned batch sizes at most this factor apart.
MAX_INTERPOLATION_SPAN = 2.0


@dataclass(frozen=True, kw_only=True)
class StepWindow:
    """One busy, decode-dominated window."""

    t_end: float
    batch: int
    step_seconds: float


@dataclass(frozen=True, kw_only=True)
class Baseline:
    """Per-batch-size step times learned after warm-up."""

    points: dict[int, tuple[float, ...]] = field(default_factory=dict)
    learned_until: float = float("-inf")

    def reference(self, batch: int, *, needed: int) -> float | None:
        """Expected step time at this batch size, or None when not learned well enough."""
        full = {b: statistics.median(v) for b, v in self.points.items() if len(v) >= needed}
        if batch in full:
            return full[batch]
        lower = max((b for b in full if b < batch), default=None)
        upper = min((b for b in full if b > batch), default=None)
        if lower is None or upper is None or upper > lower * MAX_INTERPOLATION_SPAN:
            return None
        frac = (batch - lower) / (upper - lower)
        return full[lower] + (full[upper] - full[lower]) * frac


@dataclass(frozen=True, kw_only=True)
class DriftFinding:
    """The drift verdict."""

    drifted: bool
    reason: DetectorFinding
    message: str
    ratio: float | None = None


def silent_requests_per_step(chunk: Sequence[EngineSample]) -> float:
    """Running requests per engine step that returned no token over the chunk (requests in prefill).

    Per engine: the sample sums DP ranks' steps, running requests and tokens, so with n balanced ranks a
    rank's running requests are batch / n and its decoding requests per step are decoded / steps.
    """
    first, last = chunk[0], chunk[-1]
    steps = last.iterations - first.iterations
    accepted = (last.spec_accepted or 0.0) - (first.spec_accepted or 0.0)
    decoded = last.generation_tokens - first.generation_tokens - accepted
    engines = max(1, len(last.ranks))
    batch = statistics.fmean(s.running for s in chunk)
    return batch / engines - decoded / steps


def step_window(chunk: Sequence[EngineSample]) -> StepWindow | None:
    """The window over these consecutive samples, or None unless it is busy and decode-dominated.

    Busy: requests running at every scrape and steps taken. Decode-dominated: fewer than half a running
    request per step returned nothing (a request in chunked prefill returns nothing until its prefill is
    done, while its 8192-token chunks make each step take seconds), and few prompt tokens per step (prefills
    that completed).
    """
    steps = chunk[-1].iterations - chunk[0].iterations
    if len(chunk) < 2 or steps <= 0 or any(s.running <= 0 for s in chunk):
        return None
    batch = statistics.fmean(s.running for s in chunk)
    prompt = chunk[-1].prompt_tokens - chunk[0].prompt_tokens
    if silent_requests_per_step(chunk) >= MAX_SILENT_REQUESTS_PER_STEP or prompt / steps > MAX_PROMPT_TOKENS_PER_STEP:
        return None
    return StepWindow(t_end=chunk[-1].t, batch=round(batch), step_seconds=(chunk[-1].t - chunk[0].t) / steps)


def busy_windows(samples: Sequence[EngineSample], *, window_seconds: float) -> list[StepWindow]:
    """Cut the samples into windows of about `window_seconds` and keep the busy, decode-dominated ones."""
    windows: list[StepWindow] = []
    start = 0
    for end in range(1, len(samples)):
        if samples[end].t - samples[start].t >= window_seconds:
            window = step_window(samples[start : end + 1])
            start = end
            if window is not None:
                windows.append(window)
    return windows


def learn(baseline: Baseline, windows: Sequence[StepWindow], *, after: float, needed: int) -> Baseline:
    """Add new windows that end after warm-up to batch sizes that still lack `needed` points."""
    points = dict(baseline.points)
    newest = baseline.learned_until
    for w in windows:
        if w.t_end <= baseline.learned_until:
            continue
        newest = max(newest, w.t_end)
        if w.t_end >= after and len(points.get(w.batch, ())) < needed:
            points[w.batch] = (*points.get(w.batch, ()), w.step_seconds)
    return Baseline(points=points, learned_until=newest)


def _ratios(baseline: Baseline, windows: Sequence[StepWindow], *, now: float, cfg: DriftSpec) -> list[float]:
    """Step time over baseline of each window of the sustain span ending at `now` with a learned reference."""
    ratios = []
    for w in windows:
        ref = baseline.reference(w.batch, needed=cfg.baseline_windows)
        if w.t_end >= now - cfg.sustain_seconds and ref:
            ratios.append(w.step_seconds / ref)
    return ratios


def _needed(cfg: DriftSpec) -> int:
    return max(2, int(cfg.sustain_seconds / cfg.sample_window_seconds) // 2)


def current_ratio(
    baseline: Baseline, windows: Sequence[StepWindow], *, now: float, cfg: DriftSpec, needed: int | None = None
) -> float | None:
    """The pod's median step-time ratio over the sustain span, or None with fewer than `needed` comparable
    windows (default: as many as a verdict needs)."""
    ratios = _ratios(baseline, windows, now=now, cfg=cfg)
    return statistics.median(ratios) if ratios and len(ratios) >= (needed or _needed(cfg)) else None


def detect_drift(
    baseline: Baseline,
    windows: Sequence[StepWindow],
    *,
    now: float,
    cfg: DriftSpec,
    peers: Sequence[float | None] = (),
) -> DriftFinding:
    """Drift when the median step-time ratio over the sustain span exceeds 1 + threshold, and exceeds the
    median of `peers` (the service's other pods' current step times against this pod's baseline,
    `peer_ratios`; None: that peer has no comparable window yet) by the threshold too; with peers and none of
    them comparable yet, no verdict."""
    if not cfg.enabled:
        return DriftFinding(drifted=False, reason=DetectorFinding.DISABLED, message="drift detection is off")
    ratios = _ratios(baseline, windows, now=now, cfg=cfg)
    needed = _needed(cfg)
    if len(ratios) < needed:
        return DriftFinding(
            drifted=False,
            reason=DetectorFinding.INSUFFICIENT_DATA,
            message=f"{len(ratios)} comparable windows, {needed} needed",
        )
    ratio = statistics.median(ratios)
    if ratio < 1.0 + cfg.threshold:
        return DriftFinding(
            drifted=False, reason=DetectorFinding.WITHIN_BASELINE, message=f"step-time ratio {ratio:.2f}", ratio=ratio
        )
    judged = [p for p in peers if p is not None]
    if peers and not judged:
        return DriftFinding(
            drifted=False,
            reason=DetectorFinding.PEERS_LEARNING,
            message=f"engine steps take {ratio - 1:.0%} longer than this pod's baseline; none of its {len(peers)} "
            "peer(s) has a busy window at these batch sizes yet, so a slower host or workload cannot be told apart",
            ratio=ratio,
        )
    peers = judged
    if peers and ratio < statistics.median(peers) * (1.0 + cfg.threshold):
        return DriftFinding(
            drifted=False,
            reason=DetectorFinding.SERVICE_WIDE,
            message=f"engine steps take {ratio - 1:.0%} longer than this pod's baseline, and its {len(peers)} "
            f"peer(s)' {statistics.median(peers) - 1:.0%} longer than it at the same batch sizes: the whole "
            "service is slower, not this engine",
            ratio=ratio,
        )
    return DriftFinding(
        drifted=True,
        reason=DetectorFinding.THROUGHPUT_DRIFT,
        message=f"engine steps take {ratio - 1:.0%} longer than this pod's baseline at the same batch sizes "
        f"(median of {len(ratios)} windows over {cfg.sustain_seconds:.0f}s; threshold {cfg.threshold:.0%}"
        + (f"; its {len(peers)} peer(s) {statistics.median(peers) - 1:+.0%})" if peers else "; no peer to compare)"),
        ratio=ratio,
    )


@dataclass(frozen=True, kw_only=True)
class DriftTracker:
    """Incremental drift state of one pod: O(1) work per scrape, bounded memory."""

    baseline: Baseline = field(default_factory=Baseline)
    windows: tuple[StepWindow, ...] = ()
    pending: tuple[EngineSample, ...] = ()


def track(state: DriftTracker, sample: EngineSample, *, ready_at: float, cfg: DriftSpec) -> DriftTracker:
    """Fold one scrape in: close a window when it spans `sampleWindowSeconds`, learn, forget old windows."""
    pending = (*state.pending, sample)
    if sample.t - pending[0].t < cfg.sample_window_seconds:
        return DriftTracker(baseline=state.baseline, windows=state.windows, pending=pending)
    window = step_window(pending)
    windows = state.windows + ((window,) if window else ())
    horizon = sample.t - cfg.sustain_seconds - cfg.sample_window_seconds
    baseline = learn(state.baseline, windows, after=ready_at + cfg.warmup_seconds, needed=cfg.baseline_windows)
    return DriftTracker(baseline=baseline, windows=tuple(w for w in windows if w.t_end >= horizon), pending=(sample,))


def learning_seconds(cfg: DriftSpec) -> float:
    """How long after Ready a pod learns its baseline at the soonest: the warm-up, then its baseline windows."""
    return cfg.warmup_seconds + cfg.baseline_windows * cfg.sample_window_seconds


def peer_ratios(
    trackers: Mapping[str, DriftTracker],
    pod: str,
    *,
    now: float,
    cfg: DriftSpec,
    ready_since: Mapping[str, float | None],
) -> tuple[float | None, ...]:
    """Each peer's current step time (its windows of the sustain span) against `pod`'s own baseline at the
    same batch sizes; None for a peer still learning (not Ready, or Ready for less than `learning_seconds`)
    with no such window yet. A peer Ready for longer with no comparable window (idle: no busy window, or busy
    at other batch sizes) says nothing about the host and holds nothing back, so it is left out: the pod is
    then judged on its own baseline, as a one-replica service is (an e2e drift drill with one loaded replica
    and one idle never rolled while idle peers counted as learning).

    Measured against the pod's baseline, not the peer's: `detect_drift` then compares the pod's step time now
    with its peers' step time now, same engine configuration, same host, same moment. Against each peer's own
    baseline, the soak rolled a pod 13% over its baseline because its peer read -13% against its own: two
    baselines, learned minutes apart while the host's speed moved, disagreed by ~30% about the same healthy
    engine. One window is enough for a peer: a peer whose busy windows are rarer (a P/D decode engine, a
    lighter-loaded replica) still says whether the whole service is slower."""
    mine = trackers[pod].baseline if pod in trackers else Baseline()
    ratios: list[float | None] = []
    for uid, peer in trackers.items():
        if uid == pod:
            continue
        ratio = current_ratio(mine, peer.windows, now=now, cfg=cfg, needed=1)
        since = ready_since.get(uid)
        if ratio is not None or since is None or now - since < learning_seconds(cfg):
            ratios.append(ratio)
    return tuple(ratios)


def dump_baseline(baseline: Baseline) -> str:
    """The learned step times as compact JSON ({batch size: [seconds, ...]}), for the pod's annotation:
    a restarted or failed-over operator restores them instead of learning an engine that is already slow."""
    return json.dumps(
        {str(b): [round(v, 6) for v in pts] for b, pts in sorted(baseline.points.items())}, separators=(",", ":")
    )


def load_baseline(raw: str | None) -> Baseline | None:
    """The baseline of `dump_baseline`; None when absent or not ours (then it is learned again)."""
    try:
        value = json.loads(raw) if raw else None
        if not isinstance(value, dict):
            return None
        points = {int(b): tuple(float(v) for v in pts) for b, pts in value.items() if isinstance(pts, list)}
    except (ValueError, TypeError):
        return None
    return Baseline(points={b: pts for b, pts in points.items() if pts and all(v > 0 for v in pts)})
