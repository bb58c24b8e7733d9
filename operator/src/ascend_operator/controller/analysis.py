"""The health side of a judged rollout (spec.rollout.analysis): each health pass adds its scrapes to the
window of the judged replica and of the previous revision's replicas, and once the window is long enough
asks the comparison (ascend_operator/rollout_analysis) for a verdict, which it leaves in memory for the
reconcile loop (controller/rollout.py) to act on.

- the window starts when the judged pod is Ready by the health judgement (canary and config check passed)
  and carries at least half the requests in flight of a previous replica (clients move to it as their
  requests end), so neither its load time nor its ramp is part of it; it covers the same scrapes on both
  sides: a pass in which any of those pods gave no sample adds to neither side (a cold CI run froze the host
  for ~50 s; the judged pod's next scrape answered, a previous replica's timed out, and the new side alone
  counted 50 s without tokens: a neutral change rolled back on TokensPerRequest 0.20x);
- too little traffic extends it; a judged pod that goes before the verdict (a stall or fault roll) or
  carries a fault (Stalled, ConfigMismatch) is a failed analysis;
- with no replica left on the previous revision (one replica), the figures recorded over the last full
  window before the change stand in for them (`record`: a rolling window while nothing is judged).
"""

import logging
from collections.abc import Mapping, Sequence

from ascend_operator.api.reasons import RolloutSignal
from ascend_operator.api.rollout import AnalysisSpec
from ascend_operator.controller.rollout_memory import Concluded, Window
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.views import PodView
from ascend_operator.health.samples import EngineSample
from ascend_operator.rollout_analysis import AnalysisVerdict, Figures, Input, Outcome, figures, judge

log = logging.getLogger(__name__)

RECORDED = "recorded"
REPLICAS = "replicas"


def _on(pod: PodView, revision: str) -> bool:
    """The pod runs `revision`; a pod made before revisions were recorded (no label) runs the current one,
    or the reconcile pass would have replaced it as stale."""
    return pod.revision in (revision, None)


#: The judged pod's requests in flight, against the previous replicas' mean, before its window starts.
SHARE = 0.5


def _carries_its_share(
    sample: EngineSample | None, baseline: Sequence[PodView], samples: Mapping[str, EngineSample | None]
) -> bool:
    """Clients move to a new pod as their requests end, so a pod that just turned Ready serves less than its
    share for about one request's length (at real speed, 400-token requests took 33 s: a 10 s window from
    Ready judged an almost idle pod against loaded ones and passed a change that queues). The window starts
    once it runs and queues at least half of what a previous replica does (at once with no previous one)."""
    if sample is None:
        return False
    others = [s.running + s.waiting for p in baseline if (s := samples.get(p.uid)) is not None]
    if not others:
        return True
    return sample.running + sample.waiting >= SHARE * sum(others) / len(others)


def _add(window: Window, pods: Sequence[PodView], samples: Mapping[str, EngineSample | None]) -> None:
    for p in pods:
        if (s := samples.get(p.uid)) is not None:
            window.samples.setdefault(p.uid, []).append(s)


def _record(
    memory: ServiceMemory,
    analysis: AnalysisSpec,
    live: Sequence[PodView],
    ready: set[str],
    samples: Mapping[str, EngineSample | None],
    now: float,
) -> None:
    """The current revision's figures over rolling windows, kept for a one-replica comparison."""
    rm = memory.rollout
    current = rm.current
    if current is None:
        return
    if rm.record is None or rm.record.revision != current:
        rm.record = Window(revision=current, start=now)
    pods = [p for p in live if _on(p, current) and p.uid in ready and p.drain is None]
    _add(rm.record, pods, samples)
    if now - rm.record.start < analysis.seconds:
        return
    found = figures(list(rm.record.samples.values()))
    if found.requests > 0:
        rm.recorded = {current: found}
    rm.record = Window(revision=current, start=now)
    _add(rm.record, pods, samples)


def _conclude(memory: ServiceMemory, w: Window, verdict: AnalysisVerdict, compared_with: str) -> None:
    memory.rollout.concluded = Concluded(
        revision=w.revision, verdict=verdict, compared_with=compared_with, canary=w.canary_name
    )
    memory.rollout.window = None


def analyse(
    memory: ServiceMemory,
    *,
    live: Sequence[PodView],
    ready: set[str],
    samples: Mapping[str, EngineSample | None],
    canary_failures: Mapping[str, int],
    now: float,
) -> None:
    """One health pass's part in a judged rollout (`now`: the monotonic clock of the samples)."""
    rm = memory.rollout
    j = rm.judging
    if j is None:
        rm.window = None
        return
    if rm.concluded is not None and rm.concluded.revision == j.update:
        return
    judged = next((p for p in live if p.revision == j.update and not p.terminating), None)
    w = rm.window if rm.window is not None and rm.window.revision == j.update else None
    if w is not None and (judged is None or judged.uid != w.canary):
        roll = next((r for r in reversed(memory.rolls) if r.uid == w.canary), None)
        signal = roll.reason if roll is not None else RolloutSignal.CANARY_GONE
        why = f"pod {w.canary_name} went before the analysis ended" + (f": {roll.message}" if roll else "")
        _conclude(memory, w, AnalysisVerdict(outcome=Outcome.FAILED, signal=signal, message=why), REPLICAS)
        return
    if judged is None:
        return
    if w is not None and (fault := memory.pod_faults.get(judged.uid)) is not None:
        why = f"pod {judged.name}: {fault.message}"
        _conclude(memory, w, AnalysisVerdict(outcome=Outcome.FAILED, signal=fault.reason, message=why), REPLICAS)
        return
    baseline = [p for p in live if _on(p, j.current) and p.uid in ready and p.drain is None]
    if w is None:
        if judged.uid not in ready or not _carries_its_share(samples.get(judged.uid), baseline, samples):
            return
        w = Window(
            revision=j.update,
            start=now,
            canary=judged.uid,
            canary_name=judged.name,
            failures_at_start=canary_failures.get(judged.uid, 0),
        )
        rm.window = w
    if all(samples.get(p.uid) is not None for p in (judged, *baseline)):  # or a span only one side has
        _add(w, [judged, *baseline], samples)
    if now - w.start < j.analysis.seconds:
        return
    failed = canary_failures.get(judged.uid, 0) - w.failures_at_start
    canary = figures([w.samples.get(judged.uid, [])], canary_failures=failed)
    sides = [s for uid, s in w.samples.items() if uid != judged.uid and len(s) >= 2]
    base: Figures | None = figures(sides) if sides else rm.recorded.get(j.current)
    compared_with = REPLICAS if sides else RECORDED
    if base is None:
        why = "nothing to compare with: no replica on the previous revision and no figures recorded before the change"
        _conclude(memory, w, AnalysisVerdict(outcome=Outcome.PASSED, message=why), RECORDED)
        return
    verdict = judge(Input(canary=canary, baseline=base, thresholds=j.analysis.thresholds))
    level = logging.DEBUG if verdict.outcome is Outcome.EXTEND else logging.INFO  # the figures behind a verdict
    log.log(level, "analysis of %s on %s: %s %s; new %s; previous %s", j.update, w.canary_name, verdict.outcome,
            verdict.signal, canary, base)  # fmt: skip
    if verdict.outcome is not Outcome.EXTEND:
        _conclude(memory, w, verdict, compared_with)


def observe_rollout(
    memory: ServiceMemory,
    analysis: AnalysisSpec | None,
    *,
    live: Sequence[PodView],
    ready: set[str],
    samples: Mapping[str, EngineSample | None],
    canary_failures: Mapping[str, int],
    now: float,
) -> None:
    """The health pass's one call: record the current revision while nothing is judged, judge otherwise."""
    if analysis is None:
        memory.rollout.window = memory.rollout.record = None
        return
    if memory.rollout.judging is None:
        _record(memory, analysis, live, ready, samples, now)
    analyse(memory, live=live, ready=ready, samples=samples, canary_failures=canary_failures, now=now)
