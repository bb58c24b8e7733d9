"""Each pod's health as a pure state machine: `step(state, observations, now) -> (state, actions)`.

Why a machine: the I/O layer (controller/monitor.py) gathers observations (a scrape, a canary that ended,
a config check) and executes actions (patch the readiness gate, ask the roll policy, post an event); every
decision in between is here, so it is tested with a fake clock and no cluster, and the trace benchmark
(perf/detectors.py) replays exactly what the operator runs. Times are the operator's monotonic clock.
"""

from dataclasses import dataclass, field, replace

from ascend_operator.api.health import HealthSpec
from ascend_operator.api.reasons import EventReason, VerdictReason
from ascend_operator.disruption.model import HUNG_REASONS, RollReason
from ascend_operator.health.chips import ChipFinding
from ascend_operator.health.drift import Baseline, DriftTracker
from ascend_operator.health.group import GroupObservation
from ascend_operator.health.judge import (
    CONFIG_MISMATCH,
    PENDING,
    CanaryOutcome,
    PodHealth,
    Verdict,
    fold_canary,
    fold_sample,
    judge,
    mark_ready,
)
from ascend_operator.health.samples import EngineSample


@dataclass(frozen=True, kw_only=True)
class Observations:
    """What the I/O layer saw of one pod since the last step."""

    sample: EngineSample | None = None
    """This pass's /metrics scrape; None when the engine did not answer."""
    canary: CanaryOutcome | None = None
    """A canary that ended since the last step."""
    config: tuple[str, ...] | None = None
    """Mismatches from a config check run this pass (empty: the engine runs the asked config)."""
    group: GroupObservation | None = None
    """A group leader's workers as their pods show them (`health.group.observe_group`); None for a
    single-node pod."""
    draining: bool = False
    """The pod carries the operator's drain annotation: it leaves the Service before a planned deletion."""
    chips: ChipFinding | None = None
    """The device plugin's verdict on the pod's chips and node this pass (None: nothing acted on, or the
    operator does not read the plugin's reports)."""
    peers: tuple[float | None, ...] = ()
    """The service's other pods' current drift ratios (health/drift.py `peer_ratios`): a slowdown they share
    is not this pod's drift."""
    restarts: int | None = None
    """The engine container's restart count as the kubelet reports it (None: not known)."""
    last_exit: str = ""
    """How the engine container's previous run ended, as the kubelet reports it ("Error, exit code 1")."""


@dataclass(frozen=True, kw_only=True)
class SetGate:
    """Write the readiness gate."""

    ready: bool
    reason: VerdictReason
    message: str


@dataclass(frozen=True, kw_only=True)
class RequestRoll:
    """Ask the roll policy to recreate the pod (it may refuse: rate limit, cooldown, budget)."""

    reason: RollReason
    message: str
    evidence: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Announce:
    """Post an event about the pod."""

    type: str
    reason: VerdictReason | EventReason
    message: str


Action = SetGate | RequestRoll | Announce


def resume(
    gate: tuple[bool, str] | None,
    baseline: Baseline | None = None,
    *,
    restarts: int | None = None,
    restarted_since_gate: bool = False,
    loaded: bool = False,
) -> PodHealth:
    """The machine of a pod seen for the first time by this operator process, from what the pod carries:
    a gate that is True says the engine has served (its startup grace is over); the drift baseline an
    earlier operator learned (its annotation) is kept, so an engine already slow is not learned as normal.
    `restarts` is the engine container's restart count now: history, unless the container's current run
    started after the gate was last written (`restarted_since_gate`): then the gate vouches for the run before
    the last restart, which happened while no operator watched (killed, or handing over), and the first step
    treats that restart as it would one it saw (`_restart`: an event, the gate down until the new run passes).
    `loaded`: the kubelet says the engine's startup probe passed, so it has served too whatever its gate says:
    a pod whose gate an earlier operator took down (Stalled) is not back inside its startup grace, where no
    roll may touch it (the soak, seed 41: a hung pod was rolled 548 s late, after an operator restart)."""
    drift = DriftTracker(baseline=baseline) if baseline is not None else DriftTracker()
    unseen = restarted_since_gate and restarts is not None and restarts > 0
    known = restarts - 1 if unseen and restarts is not None else restarts
    return PodHealth(gate=gate, served=bool(gate and gate[0]) or loaded, drift=drift, restarts=known)


def step(
    state: PodHealth, obs: Observations, *, now: float, cfg: HealthSpec, decode_slots: int | None = None
) -> tuple[PodHealth, Verdict, tuple[Action, ...]]:
    """Fold the observations in, judge, and say what to do. `decode_slots`: the pod is a P/D decode engine
    with this `--max-num-seqs` (health/stall.py `_transfer_stuck`); None: any other engine."""
    actions: list[Action] = []
    state, restarted = _restart(state, obs)
    if restarted is not None:
        actions.append(restarted)
    if obs.sample is not None:
        state = fold_sample(state, obs.sample, cfg=cfg)
    if obs.canary is not None:
        state = fold_canary(state, obs.canary)
    state = replace(state, chips=obs.chips)
    if obs.config is not None:
        state = replace(state, mismatches=obs.config)
        if obs.config:
            actions.append(Announce(type="Warning", reason=CONFIG_MISMATCH.reason, message="; ".join(obs.config)))
    verdict = judge(state, now=now, cfg=cfg, group=obs.group, decode_slots=decode_slots, peers=obs.peers)
    if obs.draining:  # out of the Service until deleted; only a hung pod still asks for a roll (no drain wait)
        stalled = verdict.roll in HUNG_REASONS
        verdict = Verdict(
            ready=False,
            reason=VerdictReason.DRAINING,
            message=f"draining before a planned deletion; {verdict.reason}: {verdict.message}",
            roll=verdict.roll if stalled else None,
            evidence=verdict.evidence if stalled else {},
        )
    else:
        state = mark_ready(state, verdict, now=now)
    # A verdict that only says "not judged yet" (a `pending` rule) never takes down a gate that is True:
    # after an operator restart or a peering handover the engine is still the one that passed, and pulling
    # it out of the Service until the config check and a canary have run again is an outage made by us.
    keep = verdict.reason in PENDING and state.gate is not None and state.gate[0]
    if not keep and state.gate != (verdict.ready, verdict.reason):
        actions.append(SetGate(ready=verdict.ready, reason=verdict.reason, message=verdict.message))
        state = replace(state, gate=(verdict.ready, verdict.reason))
    if verdict.roll is not None:
        actions.append(RequestRoll(reason=verdict.roll, message=verdict.message, evidence=verdict.evidence))
    return state, verdict, tuple(actions)


def _restart(state: PodHealth, obs: Observations) -> tuple[PodHealth, Announce | None]:
    """The kubelet restarted the engine container since the last step: a new engine process in the same pod.
    What the operator knew of the old one no longer holds: its samples (the new process's counters start
    from 0), its canaries (one that passed vouched for a process now gone: a crash shorter than its vouching
    window went unseen before), its effective config and its Ready time (drift windows start again; the
    learned baseline stays, same pod and chips). The gate is forgotten so the next verdict takes it down
    until the new process passes again; the startup grace is not restarted (the pod served: an engine
    that does not answer is NotAnswering, which never rolls). No roll: the kubelet restarts it already."""
    if obs.restarts is None or state.restarts == obs.restarts:
        return state, None
    known = state.restarts
    state = replace(state, restarts=obs.restarts)
    if known is None or obs.restarts < known:  # first seen (or a new pod object under the same uid: none)
        return state, None
    fresh = PodHealth(restarts=obs.restarts, served=state.served, drift=DriftTracker(baseline=state.drift.baseline))
    ended = f" (its previous run: {obs.last_exit})" if obs.last_exit else ""
    message = (
        f"engine container restarted by the kubelet, {obs.restarts} restart(s){ended}: out of the Service until"
        " its config check and a canary pass again"
    )
    return fresh, Announce(type="Warning", reason=EventReason.ENGINE_RESTARTED, message=message)


def gate_not_written(state: PodHealth) -> PodHealth:
    """The gate patch failed (API error, pod gone): forget it, so the next step writes it again."""
    return replace(state, gate=None)


def canary_due(state: PodHealth, *, now: float, cfg: HealthSpec, in_flight: bool) -> bool:
    """A canary is due when none is running and the period has passed since the last one ended."""
    return not in_flight and (state.last_canary is None or now - state.last_canary >= cfg.canary.period_seconds)


def config_check_due(state: PodHealth) -> bool:
    """The effective config is checked (with a pass's scrape) until it has been checked once."""
    return state.mismatches is None
