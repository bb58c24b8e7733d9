"""One pod's health state and verdict: pure folds over scrapes and canaries, then a chain of rules.

The verdict sets the pod's readiness gate and may ask for a roll; whether the roll happens is the roll
disruption decision (`ascend_operator.disruption`). Times are the operator's monotonic clock.

Why a chain (cert-manager's certificate `policies` style): the precedence between findings is the list's
order, each rule is one entry that exists once, and everything else derives from the entries (the
fault reasons the status names, the pending reasons the machine keeps a True gate through), so a new
detector is its module, one entry in `CHAIN` and its config model in api/health.py.
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ascend_operator.api.health import HealthSpec
from ascend_operator.api.reasons import VerdictReason
from ascend_operator.disruption.model import RollReason
from ascend_operator.health.aggregate import WINDOW_SECONDS
from ascend_operator.health.chips import ChipFinding
from ascend_operator.health.drift import DriftTracker, detect_drift, track
from ascend_operator.health.group import GroupObservation, gone_workers, name_ranks
from ascend_operator.health.samples import EngineSample, advanced
from ascend_operator.health.stall import detect_stall, frozen_span

#: Samples kept per pod at most, whatever the scrape interval (a hard bound on memory).
KEEP_SAMPLES = 240
#: Seconds of samples kept per pod, as a multiple of the stall window (at least the status figures' 30 s
#: window twice): what the detectors read. The drift detector keeps its own windows (health/drift.py).
KEEP_STALL_WINDOWS = 4


@dataclass(frozen=True, kw_only=True)
class PodHealth:
    """What the operator remembers about one pod's engine."""

    samples: tuple[EngineSample, ...] = ()
    drift: DriftTracker = field(default_factory=DriftTracker)
    canary_failures: int = 0
    last_canary: float | None = None
    mismatches: tuple[str, ...] | None = None
    """None until the effective config has been checked; empty when it matched."""
    ready_since: float | None = None
    served: bool = False
    """Ready at least once: the engine finished loading (ends the startup grace early)."""
    gate: tuple[bool, str] | None = None
    """The readiness gate (ready, reason) last written, None when unknown or its write failed."""
    chips: ChipFinding | None = None
    """The device plugin's verdict on the pod's chips and node at the last pass (health/chips.py)."""
    restarts: int | None = None
    """The engine container's restart count at the last step (the kubelet's), None until first seen."""


@dataclass(frozen=True, kw_only=True)
class CanaryOutcome:
    """One canary, judged against the engine's progress signals scraped right before it was sent and right
    after it ended (its own scrapes, not the pass's: a sample of the pass can predate the canary). Both are
    None for a canary that returned tokens: nothing reads them then."""

    ok: bool
    """Tokens came back within the timeout."""
    before: EngineSample | None
    after: EngineSample | None
    ended: float
    detail: str = ""

    @property
    def queued(self) -> bool:
        """No tokens in time, but the engine advanced meanwhile: busy (queued behind full slots or a long
        chunked prefill), not failing."""
        return not self.ok and advanced(self.before, self.after)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """Gate state, its reason, and an optional roll request."""

    ready: bool
    reason: VerdictReason
    message: str
    roll: RollReason | None = None
    evidence: dict[str, float] = field(default_factory=dict)
    ranks: tuple[str, ...] = ()
    """The DP ranks a Stalled verdict found frozen (`engine` label values); empty: the engine as a whole."""


def keep(samples: tuple[EngineSample, ...], sample: EngineSample, *, cfg: HealthSpec) -> tuple[EngineSample, ...]:
    """`samples` plus `sample`, without those older than the detectors read; the first sample of a frozen
    span stays however old, so a long stall still says since when nothing advanced."""
    every = (*samples, sample)[-KEEP_SAMPLES:]
    horizon = sample.t - max(KEEP_STALL_WINDOWS * cfg.stall.window_seconds, 2 * WINDOW_SECONDS)
    recent = next((i for i, s in enumerate(every) if s.t >= horizon), len(every) - 1)
    frozen = len(every) - len(frozen_span(every))
    return (every[frozen], *every[recent:]) if frozen < recent else every[recent:]


def fold_sample(state: PodHealth, sample: EngineSample, *, cfg: HealthSpec) -> PodHealth:
    """Add a scrape."""
    samples = keep(state.samples, sample, cfg=cfg)
    drift = state.drift
    if state.ready_since is not None:
        drift = track(drift, sample, ready_at=state.ready_since, cfg=cfg.drift)
    return replace(state, samples=samples, drift=drift)


def fold_canary(state: PodHealth, outcome: CanaryOutcome) -> PodHealth:
    """Add a canary outcome: tokens, or an engine that advanced while the canary waited, clear the failures;
    no tokens while nothing advanced is one more failure."""
    failures = 0 if outcome.ok or outcome.queued else state.canary_failures + 1
    return replace(state, canary_failures=failures, last_canary=outcome.ended)


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What a rule reads: the pod's folded state, its group (a multi-node leader), the time and the config."""

    state: PodHealth
    now: float
    cfg: HealthSpec
    group: GroupObservation | None = None
    decode_slots: int | None = None
    """`--max-num-seqs` of a P/D decode engine (its KV transfers are judged too); None: any other engine."""
    peers: tuple[float | None, ...] = ()
    """The service's other pods' current drift ratios (health/drift.py `peer_ratios`)."""


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A rule that holds: why, and what it found."""

    message: str
    roll: bool = True
    """Ask for the rule's roll (when the rule has one); False: the finding holds it back."""
    evidence: dict[str, float] = field(default_factory=dict)
    ranks: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One entry of the judge's chain: its verdict reason (one entry per `VerdictReason`, which says in
    api/reasons.py what it means to a user; tests/unit/test_reasons.py holds the two in step), the gate it
    sets, the roll it asks for, and how the rest of the operator treats it."""

    reason: VerdictReason
    check: Callable[[Facts], Finding | None]
    """None: the rule does not apply and the next one is asked."""
    ready: bool = False
    roll: RollReason | None = None
    fault: bool = False
    """A fault of the pod: the status names it as the replica's cause (controller/causes.py)."""
    pending: bool = False
    """Says only "not judged yet": never takes down a gate that is True (health/machine.py)."""
    config: str | None = None
    """The `spec.health` field holding the rule's knobs (api/health.py), None when it has none."""

    def __call__(self, facts: Facts) -> tuple[str, str, bool]:
        """(reason, message, failed), cert-manager's policy shape."""
        found = self.check(facts)
        return self.reason, "" if found is None else found.message, found is not None

    def verdict(self, found: Finding) -> Verdict:
        roll = self.roll if found.roll else None
        return Verdict(
            ready=self.ready,
            reason=self.reason,
            message=found.message,
            roll=roll,
            evidence=found.evidence,
            ranks=found.ranks,
        )


def _node_unhealthy(f: Facts) -> Finding | None:
    chips = f.state.chips
    return Finding(message=chips.message) if chips is not None and chips.node_wide else None


def _npu_fault(f: Facts) -> Finding | None:
    chips = f.state.chips
    return Finding(message=chips.message) if chips is not None and not chips.node_wide and not chips.drain else None


def _npu_pre_separate(f: Facts) -> Finding | None:
    """A chip the plugin will separate once free, under an engine that still serves (every rule before this
    one found nothing wrong with it): the pod is drained, then replaced."""
    chips = f.state.chips
    return Finding(message=chips.message) if chips is not None and chips.drain else None


def _worker_gone(f: Facts) -> Finding | None:
    # a gone worker overrides everything the leader's engine says: its ranks cannot progress
    gone = gone_workers(f.group, served=f.state.served) if f.group is not None else None
    if gone is None:
        return None
    return Finding(
        message=gone.message, roll=f.state.served and not gone.lws_recreates, evidence={"workersGone": gone.count}
    )


def _config_mismatch(f: Facts) -> Finding | None:
    return Finding(message="; ".join(f.state.mismatches)) if f.state.mismatches else None


def _not_answering(f: Facts) -> Finding | None:
    """No /metrics answer for three scrape intervals, and no generation either: an engine whose last canary
    got tokens (or was queued) within that time and one canary cycle answers, however slow its /metrics
    under load (on 2 cores a real vLLM's API server, streaming to 8 clients, left the operator's scrapes
    unanswered for over 15 s while every canary passed: tests/real). The detectors then lack samples, and a
    stall still shows as canaries that get no tokens."""
    if not _metrics_silent(f) or _generating_unseen(f):
        return None
    return Finding(message="no /metrics answer")


def _metrics_silent(f: Facts) -> bool:
    """No /metrics sample for three scrape intervals (or none ever)."""
    samples = f.state.samples
    return not samples or f.now - samples[-1].t > 3 * f.cfg.scrape_interval_seconds


def _generating_unseen(f: Facts) -> bool:
    """/metrics went silent after answering, while canaries still get tokens: the engine generates, and its
    last samples are stale (a frozen span measured from them up to now would be the operator's own
    silence, not the engine's: real tier, 2 cores, 8 clients)."""
    return bool(f.state.samples) and _metrics_silent(f) and _canary_vouches(f)


def _canary_vouches(f: Facts) -> bool:
    """The last canary got tokens (or was queued behind progress) within 3 scrape intervals and a canary cycle:
    the engine generates, whatever its /metrics says or does not say."""
    canary = f.state.last_canary
    fresh = 3 * f.cfg.scrape_interval_seconds + canary_cycle(f.cfg)
    return canary is not None and not f.state.canary_failures and f.now - canary <= fresh


def canary_cycle(cfg: HealthSpec) -> float:
    """The longest time between two canaries' ends: its period, then (the next one having been sent) its own
    scrape before, its timeout and its scrape after (controller/engine_io.py `run_canary`). Judging a canary
    "not fresh" sooner would call an engine silent while its next canary is still on its way back: the
    real-engine tier saw exactly that, a canary queued 10 s behind 2 busy slots while /metrics was slow."""
    return cfg.canary.period_seconds + cfg.canary.timeout_seconds + 2 * cfg.scrape_timeout_seconds


def _stalled(f: Facts) -> Finding | None:
    if _generating_unseen(f):
        return None
    stall = detect_stall(
        f.state.samples,
        cfg=f.cfg.stall,
        canary_failures=f.state.canary_failures,
        decode_slots=f.decode_slots,
    )
    if not stall.stalled:
        return None
    message = stall.message
    if stall.ranks and f.group is not None:
        message = name_ranks(message, stall.ranks, f.group)
    return Finding(message=message, evidence=stall.evidence, ranks=stall.ranks)


def _checking_config(f: Facts) -> Finding | None:
    return Finding(message="effective config not checked yet") if f.state.mismatches is None else None


def _canary_failing(f: Facts) -> Finding | None:
    failures = f.state.canary_failures
    if failures >= f.cfg.canary.failure_threshold:
        return Finding(message=f"{failures} canaries without tokens and without forward progress")
    return None


def _awaiting_canary(f: Facts) -> Finding | None:
    if f.state.last_canary is None:
        return Finding(message="no canary has run yet")
    if f.state.canary_failures and f.state.ready_since is None:
        return Finding(message="the last canary returned no tokens")
    return None


def _drifted(f: Facts) -> Finding | None:
    drift = detect_drift(f.state.drift.baseline, f.state.drift.windows, now=f.now, cfg=f.cfg.drift, peers=f.peers)
    if not drift.drifted:
        return None
    return Finding(message=drift.message, evidence={"stepTimeRatio": round(drift.ratio or 0.0, 3)})


def _passing(f: Facts) -> Finding:
    return Finding(message="tokens come back and the engine advances")


NODE_UNHEALTHY = Rule(
    reason=VerdictReason.NODE_UNHEALTHY, check=_node_unhealthy, roll=RollReason.NODE_UNHEALTHY, fault=True
)
NPU_FAULT = Rule(reason=VerdictReason.NPU_FAULT, check=_npu_fault, roll=RollReason.NPU_FAULT, fault=True)
WORKER_GONE = Rule(reason=VerdictReason.WORKER_GONE, check=_worker_gone, roll=RollReason.STALLED, fault=True)
CONFIG_MISMATCH = Rule(reason=VerdictReason.CONFIG_MISMATCH, check=_config_mismatch, fault=True)
NOT_ANSWERING = Rule(reason=VerdictReason.ENGINE_NOT_ANSWERING, check=_not_answering)
STALLED = Rule(reason=VerdictReason.STALLED, check=_stalled, roll=RollReason.STALLED, fault=True, config="stall")
CHECKING_CONFIG = Rule(reason=VerdictReason.CHECKING_CONFIG, check=_checking_config, pending=True)
CANARY_FAILING = Rule(reason=VerdictReason.CANARY_FAILING, check=_canary_failing, config="canary")
AWAITING_CANARY = Rule(reason=VerdictReason.AWAITING_CANARY, check=_awaiting_canary, pending=True, config="canary")
NPU_PRE_SEPARATE = Rule(
    reason=VerdictReason.NPU_PRE_SEPARATE, check=_npu_pre_separate, ready=True, roll=RollReason.NPU_PRE_SEPARATE
)
DRIFTED = Rule(reason=VerdictReason.THROUGHPUT_DRIFT, check=_drifted, ready=True, roll=RollReason.DRIFT, config="drift")
PASSING = Rule(reason=VerdictReason.CANARY_PASSING, check=_passing, ready=True)

#: The judge's precedence, most serious finding first; the first rule that holds decides, and the last one
#: always holds. A new detector is one entry here (its detection in its own module) and its config model.
CHAIN: tuple[Rule, ...] = (
    NODE_UNHEALTHY,
    NPU_FAULT,
    WORKER_GONE,
    CONFIG_MISMATCH,
    NOT_ANSWERING,
    STALLED,
    CHECKING_CONFIG,
    CANARY_FAILING,
    AWAITING_CANARY,
    NPU_PRE_SEPARATE,
    DRIFTED,
    PASSING,
)
#: Verdict reasons that are a fault of the pod, in the chain's order (controller/causes.py ranks them).
FAULTS: tuple[VerdictReason, ...] = tuple(rule.reason for rule in CHAIN if rule.fault)
#: Verdict reasons that only say "not judged yet".
PENDING: frozenset[VerdictReason] = frozenset(rule.reason for rule in CHAIN if rule.pending)


def judge(
    state: PodHealth,
    *,
    now: float,
    cfg: HealthSpec,
    group: GroupObservation | None = None,
    decode_slots: int | None = None,
    peers: tuple[float | None, ...] = (),
) -> Verdict:
    """The pod's verdict: the first rule of `CHAIN` that holds."""
    facts = Facts(state=state, now=now, cfg=cfg, group=group, decode_slots=decode_slots, peers=peers)
    for rule in CHAIN:
        found = rule.check(facts)
        if found is not None:
            return rule.verdict(found)
    raise AssertionError("the chain ends in a rule that always holds")


def mark_ready(state: PodHealth, verdict: Verdict, *, now: float) -> PodHealth:
    """Remember since when the pod is ready (drift warm-up counts from there)."""
    if verdict.ready and state.ready_since is None:
        return replace(state, ready_since=now, served=True)
    if not verdict.ready and state.ready_since is not None:
        # windows restart from the next Ready; the learned baseline stays (the same engine, just unready)
        return replace(state, ready_since=None, drift=DriftTracker(baseline=state.drift.baseline))
    return state
