"""How many replicas, and why: an ordered chain over one pass's signals and the window of earlier passes.

Each pass turns the signals into the replicas they alone would want (`wanted`: the most any target asks,
within min..max), and `observe` keeps those wants over the longest window. `decide` then moves only on
wants that lasted, as Knative's KPA and Kthena's AutoscalingPolicy do:

- up when every want over the stable window (spec.autoscaling.scaleUpWindowSeconds) is above the
  replicas asked (a queue that lasts, not a burst), or every want over the short panic window is at least
  twice their load (far behind: waiting the stable window would queue users for nothing); wants are kept
  unrounded, so "twice" is twice the load one replica carries at its targets, not one more replica;
- down when every want over the scale-down window is below, and the last scale-up is that long ago: a single
  busy scrape in five minutes keeps the replica, so load between the two thresholds never flaps it. A
  scale-down does not hold the next one back: the window alone decides, so a load that falls through two
  replicas' worth to idle is at one replica one window after its last busy scrape, not two.

Replicas still loading (inside the startup grace) are in spec.replicas already: the queue-based want does
not depend on how many are Ready, and the KV/TTFT-based wants add to the Ready ones, so a replica that is
coming is counted as coming capacity and never asked for twice. No replica the cluster cannot place: while
a replica is Pending for lack of NPUs, no more are asked (status says so instead of piling Pending pods).
Never below one Ready replica: a scale-down waits until the replicas it keeps are Ready.

A P/D pool (`Signals.role`) reads only its own side's signals: a prefill engine runs each request for one
token, so its load is the prompt tokens waiting to be prefilled (and TTFT); a decode engine's is its slots,
KV and TPOT. The ratio between the two pools is the parent's (autoscale/disaggregation.py), after each pool decided.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ascend_operator.api.autoscaling import AutoscalingSpec, ScaleReason

#: A want at least this many times the replicas asked, over the panic window, scales up at once.
PANIC_FACTOR = 2


@dataclass(frozen=True, kw_only=True)
class Signals:
    """One health pass, as the autoscaler reads it."""

    replicas: int
    """spec.replicas now (includes loading and Pending replicas)."""
    ready: int
    """Replicas whose engine is Ready."""
    loading: int = 0
    """Replicas started but still inside the startup grace (loading weights): coming capacity."""
    unplaceable: int = 0
    """Replicas Pending because no node has the NPUs."""
    answering: int = 0
    """Engines that answered this pass's scrape (0: nothing to judge)."""
    running: float = 0.0
    waiting: float = 0.0
    slots: int = 1
    """Sequences one replica runs at once (maxNumSeqs x DP engines)."""
    kv_usage: float | None = None
    """The fullest Ready engine's KV usage (0..1)."""
    ttft_p90: float | None = None
    """Engine TTFT p90 over the last 30 s, seconds."""
    other_autoscaler: str | None = None
    """An HPA (by name) that scales this service too; the operator then leaves spec.replicas to it."""
    role: str | None = None
    """`prefill` or `decode` for a pool of a P/D split (its own signals only), None for a whole service."""
    prompt_backlog: float | None = None
    """Prompt tokens waiting (waiting requests x the mean prompt length over the last 30 s)."""
    tpot_p90: float | None = None
    """Engine TPOT p90 over the last 30 s, seconds."""


@dataclass(frozen=True)
class ScaleHistory:
    """The wants of recent passes, oldest first, and when spec.replicas last changed by the autoscaler."""

    wants: tuple[tuple[float, float], ...] = ()
    """(time, replicas wanted before rounding): unrounded, so the panic threshold compares load, not steps."""
    last_scale: float | None = None
    scaled_down: bool = False
    """The last change was a scale-down: it does not delay the next one (the wants' window does)."""


@dataclass(frozen=True)
class ScaleDecision:
    desired: int
    reason: ScaleReason
    message: str


def need(signals: Signals, spec: AutoscalingSpec) -> tuple[float, str]:
    """The replicas' worth of load this pass carries (unrounded, unbounded), and which target asked most."""
    t = spec.targets
    demand = signals.running + signals.waiting
    asks: dict[str, float] = {}
    if signals.role == "prefill":  # a prefill engine's requests last one token: its load is its prompt queue
        backlog = signals.prompt_backlog or 0.0
        asks[f"{backlog:.0f} prompt tokens queued over {t.queued_prompt_tokens_per_replica:g} per replica"] = (
            backlog / t.queued_prompt_tokens_per_replica
        )
    else:
        asks[
            f"queue: {demand:g} running+waiting over {signals.slots} slots + {t.waiting_per_replica:g} waiting "
            "per replica"
        ] = demand / (signals.slots + t.waiting_per_replica)
    tpot, tpot_target = signals.tpot_p90, t.tpot_p90_seconds
    if signals.role == "decode" and tpot is not None and tpot_target is not None and tpot > tpot_target:
        asks[f"TPOT p90 {tpot:.3f} s over target {tpot_target:g} s"] = signals.ready + 1
    if signals.kv_usage is not None and signals.role != "prefill":
        asks[f"KV usage {signals.kv_usage:.0%} over target {t.kv_cache_usage:.0%}"] = (
            signals.ready * signals.kv_usage / t.kv_cache_usage
        )
    ttft, ttft_target = signals.ttft_p90, t.ttft_p90_seconds
    if signals.role != "decode" and ttft is not None and ttft_target is not None and ttft > ttft_target:
        asks[f"TTFT p90 {ttft:.2f} s over target {ttft_target:g} s"] = signals.ready + 1
    why, most = max(asks.items(), key=lambda kv: kv[1])
    return most, why


def replicas_for(load: float, spec: AutoscalingSpec) -> int:
    """Whole replicas for `load` replicas' worth, within min..max (rounded to 1e-6 first, so 0.9 / 0.9
    is one replica, not two)."""
    return max(spec.min_replicas, min(spec.max_replicas, math.ceil(round(load, 6))))


def wanted(signals: Signals, spec: AutoscalingSpec) -> tuple[int, str]:
    """The replicas this pass alone wants (min..max), and which target asked most."""
    load, why = need(signals, spec)
    return replicas_for(load, spec), why


def observe(window: ScaleHistory, signals: Signals, spec: AutoscalingSpec, *, now: float) -> ScaleHistory:
    """The window with this pass's want (passes without an answering engine add nothing), trimmed to the
    longest window plus the one want just before it (which proves the window is covered)."""
    if signals.answering == 0:
        return window
    wants = (*window.wants, (now, need(signals, spec)[0]))
    horizon = now - max(spec.scale_up_window_seconds, spec.scale_down_window_seconds, spec.panic_window_seconds)
    older = [i for i, (t, _) in enumerate(wants) if t <= horizon]
    return replace(window, wants=wants[older[-1] if older else 0 :])


def _over(window: ScaleHistory, seconds: float, now: float) -> list[float] | None:
    """The wants since `now - seconds` (with the last one at or before it); None while the window is not
    covered yet (the first want is younger than the window)."""
    start = now - seconds
    if not window.wants or window.wants[0][0] > start:
        return None
    before = [i for i, (t, _) in enumerate(window.wants) if t <= start]
    return [w for _, w in window.wants[before[-1] :]]


Rule = Callable[[Signals, ScaleHistory, AutoscalingSpec, float], ScaleDecision | None]


def _other_autoscaler(s: Signals, w: ScaleHistory, spec: AutoscalingSpec, now: float) -> ScaleDecision | None:
    if s.other_autoscaler is None:
        return None
    return ScaleDecision(
        s.replicas,
        ScaleReason.OTHER_AUTOSCALER,
        f"HorizontalPodAutoscaler {s.other_autoscaler} scales this service too: the operator leaves "
        "spec.replicas to it (delete the HPA or spec.autoscaling)",
    )


def _bounds(s: Signals, w: ScaleHistory, spec: AutoscalingSpec, now: float) -> ScaleDecision | None:
    bounded = max(spec.min_replicas, min(spec.max_replicas, s.replicas))
    if bounded == s.replicas:
        return None
    return ScaleDecision(
        bounded, ScaleReason.OUT_OF_BOUNDS, f"{s.replicas} replicas outside {spec.min_replicas}..{spec.max_replicas}"
    )


def _no_signal(s: Signals, w: ScaleHistory, spec: AutoscalingSpec, now: float) -> ScaleDecision | None:
    if s.answering > 0:
        return None
    coming = f" ({s.loading} loading)" if s.loading else ""
    return ScaleDecision(s.replicas, ScaleReason.NO_SIGNAL, f"no engine answered its /metrics{coming}: holding")


def _up(s: Signals, w: ScaleHistory, spec: AutoscalingSpec, now: float) -> ScaleDecision | None:
    stable = _over(w, spec.scale_up_window_seconds, now)
    panic = _over(w, spec.panic_window_seconds, now)
    target, reason = s.replicas, ScaleReason.SCALE_UP
    if stable is not None:
        target = max(target, replicas_for(min(stable), spec))
    if panic is not None and min(panic) >= PANIC_FACTOR * s.replicas and replicas_for(min(panic), spec) > target:
        target, reason = replicas_for(min(panic), spec), ScaleReason.PANIC_SCALE_UP
    if target <= s.replicas:
        return None
    why = wanted(s, spec)[1]
    if s.unplaceable:
        return ScaleDecision(
            s.replicas,
            ScaleReason.NO_CAPACITY,
            f"{target} replicas wanted ({why}) but {s.unplaceable} replica(s) Pending: no node has the NPUs for "
            "another; holding at " + str(s.replicas),
        )
    lasted = spec.panic_window_seconds if reason is ScaleReason.PANIC_SCALE_UP else spec.scale_up_window_seconds
    coming = f"; {s.loading} loading counted as coming capacity" if s.loading else ""
    return ScaleDecision(target, reason, f"{s.replicas} -> {target}: {why} for {lasted:g} s{coming}")


def _down(s: Signals, w: ScaleHistory, spec: AutoscalingSpec, now: float) -> ScaleDecision | None:
    wants = _over(w, spec.scale_down_window_seconds, now)
    if wants is None or (target := replicas_for(max(wants), spec)) >= s.replicas:
        return None
    if not w.scaled_down and w.last_scale is not None and now - w.last_scale < spec.scale_down_window_seconds:
        return None
    if s.ready < target:
        return ScaleDecision(
            s.replicas,
            ScaleReason.NOT_READY,
            f"{target} replicas would do, but only {s.ready} Ready: no replica goes until those kept serve",
        )
    return ScaleDecision(
        target,
        ScaleReason.SCALE_DOWN,
        f"{s.replicas} -> {target}: no scrape wanted more than {target} for {spec.scale_down_window_seconds:g} s",
    )


RULES: tuple[Rule, ...] = (_other_autoscaler, _bounds, _no_signal, _up, _down)


def decide(signals: Signals, window: ScaleHistory, spec: AutoscalingSpec, now: float) -> ScaleDecision:
    """The first rule that speaks, or hold (Steady while the windows are covered, WindowFilling before)."""
    for rule in RULES:
        if (decision := rule(signals, window, spec, now)) is not None:
            return decision
    want, why = wanted(signals, spec)
    if _over(window, spec.scale_up_window_seconds, now) is None:
        return ScaleDecision(
            signals.replicas, ScaleReason.WINDOW_FILLING, f"wants {want} ({why}); window still filling"
        )
    return ScaleDecision(signals.replicas, ScaleReason.STEADY, f"wants {want} now ({why}); holding {signals.replicas}")
