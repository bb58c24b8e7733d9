"""Stall detection as a policy chain: the first policy that explains the engine's state decides.

A stall is something asked of the engine and no forward progress for a window. Asked: requests running or
waiting at some scrape of the frozen span, or a canary that got no tokens while nothing advanced (an engine
that hangs while idle is only ever asked by the canary: without this it would be unready forever and never
rolled). Progress is the one definition of `ascend_operator.canary.progress`: a counter advancing or the KV
gauge moving, because a 300K/512K chunked prefill moves only the KV gauge until it completes (the seed's
512K run went 0.6% -> 83.7% -> 90.8% -> 97.5% KV). KV >= 97.5% is evidence in the message, not a trigger.
A decode engine of a P/D pair is also judged on its KV transfers (`_transfer_stuck`): requests waiting for
their KV with no transfer completing for a window stall it, though requests that need no transfer still
advance. What the engine exports cannot name a request's state, so the rule reads it from the scheduler's
rules: vLLM 0.25.1 exports its skipped_waiting queue as `deferred` (vllm/v1/metrics/loggers.py:1083-1085,
SchedulerStats scheduler.py:2303), and a decode request stays there while its KV is on the wire and after it
arrived, until the waiting loop promotes it (scheduler.py:2441-2453); that loop runs only while running is
below max_num_seqs (scheduler.py:640-645), and then promotes an arrived request in the same step. So
`deferred` on a full engine may be KV that arrived and waits for a slot (a busy engine, judged by its progress
like any other), while `deferred` that stays through a whole window in which a running slot was free at every
scrape, with no `external_kv_transfer` prompt tokens arriving (counted with a promoted request's first token,
vllm/v1/metrics/stats.py:304-311, 365-367), is KV that is not arriving. Only decode-role engines are judged
so (`decode_slots`): elsewhere `deferred` is grammar compiles, LoRA budget skips or paused streaming sessions
(scheduler.py:1854-1858, 667-678), none a transfer. Not a stall: an idle engine, a stale KV gauge with nothing
asked after aborted requests (vllm issue 29928), a canary queued behind busy slots while the engine advances.
Pure: samples and time in, a finding out.

Each DP rank is judged too, by the same chain over its own series (`samples.rank_view`): summed over
ranks, one stalled rank among eight progressing ones looks healthy, yet the requests routed to it never
finish. A rank is asked only by its own running/waiting requests (which rank a canary went to is unknown,
so canary failures count for the whole engine only). A stalled rank stalls the pod, named in the message.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ascend_operator.api.disaggregation import PdRole
from ascend_operator.api.health import StallSpec
from ascend_operator.api.reasons import DetectorFinding
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.canary.progress import restarted
from ascend_operator.health.samples import EngineSample, advanced, rank_view


@dataclass(frozen=True, kw_only=True)
class StallFinding:
    """The verdict with the policy that gave it and its evidence."""

    stalled: bool
    reason: DetectorFinding
    message: str
    evidence: dict[str, float] = field(default_factory=dict)
    ranks: tuple[str, ...] = ()
    """The DP ranks (`engine` label values) found stalled; empty when judged as one engine."""


Policy = Callable[[Sequence[EngineSample], StallSpec, int, int | None], StallFinding | None]
"""(samples, config, canary failures, decode slots) -> a finding, or None to ask the next policy. Decode
slots: `--max-num-seqs` of a decode engine of a P/D pair (per DP rank, as vLLM applies it); None elsewhere.
Time is judged up to the last answered scrape (`samples[-1].t`), never to "now": scrapes that went
unanswered since are no evidence of a frozen engine (a loaded API server answers /metrics late while the
engine generates), and silence is the judge's EngineNotAnswering to call (health/judge.py). Measured to now,
a stall window shorter than that rule's three scrape intervals called 10 s of unanswered scrapes a stall
(the real-engine tier's queued phase, stall window 10 s at a 5 s scrape, on a loaded CI host)."""


def _no_data(
    samples: Sequence[EngineSample], cfg: StallSpec, canary_failures: int, slots: int | None
) -> StallFinding | None:
    if len(samples) < 2:
        return StallFinding(stalled=False, reason=DetectorFinding.INSUFFICIENT_DATA, message="fewer than two scrapes")
    return None


def frozen_span(samples: Sequence[EngineSample]) -> Sequence[EngineSample]:
    """The trailing samples between which nothing advanced (at least the last one); an engine restart (a
    counter going backwards) also ends the span: the new process is judged from its own first sample."""
    start = len(samples) - 1
    while start > 0:
        before, after = samples[start - 1], samples[start]
        if advanced(before, after) or restarted(before.progress, after.progress):
            break
        start -= 1
    return samples[start:]


def stuck_since(samples: Sequence[EngineSample]) -> float:
    """Time of the earliest sample from which the engine made no forward progress."""
    return frozen_span(samples)[0].t


def _idle(
    samples: Sequence[EngineSample], cfg: StallSpec, canary_failures: int, slots: int | None
) -> StallFinding | None:
    # Asked now, not at some point of the span: requests that finished or were aborted (running back to 0
    # with a stale KV gauge) ask nothing more of the engine.
    last = samples[-1]
    if last.running <= 0 and last.waiting <= 0 and canary_failures <= 0:
        return StallFinding(
            stalled=False,
            reason=DetectorFinding.IDLE,
            message="nothing asked of the engine" + (f" (KV gauge reads {last.kv_usage:.1%})" if last.kv_usage else ""),
        )
    return None


def _progressing(
    samples: Sequence[EngineSample], cfg: StallSpec, canary_failures: int, slots: int | None
) -> StallFinding | None:
    frozen_for = samples[-1].t - stuck_since(samples)
    if frozen_for < cfg.window_seconds:
        return StallFinding(
            stalled=False,
            reason=DetectorFinding.PROGRESSING,
            message=f"progress within the last {cfg.window_seconds:.0f}s",
            evidence={"frozenSeconds": round(frozen_for, 1)},
        )
    return None


def _stalled(samples: Sequence[EngineSample], cfg: StallSpec, canary_failures: int, slots: int | None) -> StallFinding:
    last = samples[-1]
    frozen_for = last.t - stuck_since(samples)
    strong = last.kv_usage >= cfg.kv_evidence_threshold
    detail = (
        f"; KV at {last.kv_usage:.1%} (>= {cfg.kv_evidence_threshold:.1%}, the seed's 512K stall)" if strong else ""
    )
    asked = f"{last.running:.0f} request(s) running, {last.waiting:.0f} waiting"
    if last.running <= 0 and last.waiting <= 0:
        asked = f"{canary_failures} canary request(s) got no tokens"
    return StallFinding(
        stalled=True,
        reason=DetectorFinding.STALLED,
        message=f"{asked} and no forward progress for {frozen_for:.0f}s{detail}",
        evidence={
            "frozenSeconds": round(frozen_for, 1),
            "running": last.running,
            "waiting": last.waiting,
            "kvUsage": round(last.kv_usage, 4),
            "canaryFailures": float(canary_failures),
        },
    )


def slot_free(sample: EngineSample, slots: int) -> bool:
    """A running slot was free at this scrape, on every DP rank (vLLM's max_num_seqs is each engine core's):
    the waiting loop ran at that step (scheduler.py:640-645), so a request whose KV had arrived was promoted.
    A full rank hides which of the deferred requests wait for a slot, so one full rank is enough to say so."""
    if len(sample.ranks) >= 2:
        return all(rank.running < slots for rank in sample.ranks.values())
    return sample.running < slots


def decode_slots(spec: AscendInferenceServiceSpec) -> int | None:
    """`--max-num-seqs` of a P/D decode role's engines, whose transfers `_transfer_stuck` judges; None for
    any other service (a prefill role, an aggregated service)."""
    role = spec.pd_role
    return spec.engine.max_num_seqs if role is not None and role.role is PdRole.DECODE else None


def transfer_span(samples: Sequence[EngineSample], slots: int) -> Sequence[EngineSample]:
    """The trailing samples in which requests waited for KV from a prefill engine and none arrived: each has
    deferred requests and a free running slot, and the same external prompt tokens as the one before (empty:
    none waits now, or the engine is full and its deferred requests may be waiting for a slot)."""
    start = len(samples)
    while start > 0 and samples[start - 1].deferred > 0 and slot_free(samples[start - 1], slots):
        if start < len(samples) and samples[start].external_prompt_tokens != samples[start - 1].external_prompt_tokens:
            break
        start -= 1
    return samples[start:]


def _transfer_stuck(
    samples: Sequence[EngineSample], cfg: StallSpec, canary_failures: int, slots: int | None
) -> StallFinding | None:
    """A decode engine whose KV transfers stopped still advances on every request that needs none (the
    operator's canary among them), so it is judged on its transfers too: requests waiting for KV for a
    window with a running slot free and no transfer completing is no forward progress for the requests the
    router sends it. A full decode engine is left to `_progressing`: generating, it is healthy."""
    if slots is None:
        return None
    span = transfer_span(samples, slots)
    last = samples[-1]
    if not span or last.t - span[0].t < cfg.window_seconds:
        return None
    waited = last.t - span[0].t
    return StallFinding(
        stalled=True,
        reason=DetectorFinding.STALLED,
        message=f"{last.deferred:.0f} request(s) waiting for their KV from a prefill engine and no transfer "
        f"completed for {waited:.0f}s with a running slot free ({last.running:.0f} of {slots} running; requests "
        "that need no transfer still run)",
        evidence={
            "frozenSeconds": round(waited, 1),
            "running": last.running,
            "waiting": last.waiting,
            "kvUsage": round(last.kv_usage, 4),
            "waitingForKV": last.deferred,
        },
    )


POLICIES: tuple[Policy, ...] = (_no_data, _idle, _transfer_stuck, _progressing)


def _chain(samples: Sequence[EngineSample], cfg: StallSpec, canary_failures: int, slots: int | None) -> StallFinding:
    for policy in POLICIES:
        finding = policy(samples, cfg, canary_failures, slots)
        if finding is not None:
            return finding
    return _stalled(samples, cfg, canary_failures, slots)


def rank_series(samples: Sequence[EngineSample], engine: str) -> list[EngineSample]:
    """One rank's samples, in order (scrapes without a series of the rank left out)."""
    return [view for s in samples if (view := rank_view(s, engine)) is not None]


def stalled_ranks(samples: Sequence[EngineSample], *, cfg: StallSpec) -> dict[str, StallFinding]:
    """The ranks of the latest scrape that the chain finds stalled on their own series (only when the
    engine reports more than one rank: a single rank is the engine itself)."""
    ranks = samples[-1].ranks if samples else {}
    if len(ranks) < 2:
        return {}
    # a rank's view carries no `deferred` (transfers are judged on the whole engine): no decode slots here
    found = {engine: _chain(rank_series(samples, engine), cfg, 0, None) for engine in ranks}
    return {engine: finding for engine, finding in found.items() if finding.stalled}


def _ranks_finding(stalled: dict[str, StallFinding], total: int, cfg: StallSpec) -> StallFinding:
    names = ", ".join(stalled)
    running = sum(f.evidence["running"] for f in stalled.values())
    waiting = sum(f.evidence["waiting"] for f in stalled.values())
    frozen = max(f.evidence["frozenSeconds"] for f in stalled.values())
    kv = max(f.evidence["kvUsage"] for f in stalled.values())
    others = "every rank is frozen" if len(stalled) == total else f"the other {total - len(stalled)} advance"
    detail = f"; KV at {kv:.1%} (>= {cfg.kv_evidence_threshold:.1%}, the seed's 512K stall)"
    return StallFinding(
        stalled=True,
        reason=DetectorFinding.STALLED,
        message=f"DP rank{'s' if len(stalled) > 1 else ''} {names} of {total}: {running:.0f} request(s) running, "
        f"{waiting:.0f} waiting and no forward progress for {frozen:.0f}s ({others})"
        + (detail if kv >= cfg.kv_evidence_threshold else ""),
        evidence={
            "frozenSeconds": frozen,
            "running": running,
            "waiting": waiting,
            "kvUsage": kv,
            "stalledRanks": float(len(stalled)),
        },
        ranks=tuple(stalled),
    )


def detect_stall(
    samples: Sequence[EngineSample],
    *,
    cfg: StallSpec,
    canary_failures: int = 0,
    decode_slots: int | None = None,
) -> StallFinding:
    """Run the chain over the engine and over each DP rank; a stall is what remains when no policy
    explains the state, and a stalled rank is named. `decode_slots`: the engine is a P/D decode engine with
    this `--max-num-seqs` (its KV transfers are judged too); None: any other engine."""
    ordered = sorted(samples, key=lambda s: s.t)
    whole = _chain(ordered, cfg, canary_failures, decode_slots)
    if whole.reason is DetectorFinding.INSUFFICIENT_DATA:
        return whole
    ranks = stalled_ranks(ordered, cfg=cfg)
    if not ranks:
        return whole
    finding = _ranks_finding(ranks, len(ordered[-1].ranks), cfg)
    if whole.stalled:  # the engine's own evidence (canary failures) stays
        finding = StallFinding(
            stalled=True,
            reason=DetectorFinding.STALLED,
            message=finding.message,
            evidence={**whole.evidence, **finding.evidence},
            ranks=finding.ranks,
        )
    return finding
