"""A pod's verdict from its folded scrapes and canaries: what the readiness gate shows."""

from dataclasses import replace

from ascend_operator.api.health import CanarySpec, HealthSpec
from ascend_operator.disruption import RollReason
from ascend_operator.health.judge import CanaryOutcome, PodHealth, fold_canary, fold_sample, judge, mark_ready
from ascend_operator.health.samples import EngineSample

CFG = HealthSpec(canary=CanarySpec(failure_threshold=3))


def busy(t: float, gen: float) -> EngineSample:
    return EngineSample(t=t, running=4, generation_tokens=gen, iterations=gen / 4, kv_usage=0.1)


def healthy() -> PodHealth:
    state = PodHealth(mismatches=())
    for i in range(4):
        state = fold_sample(state, busy(i * 5.0, i * 100.0), cfg=CFG)
    return fold_canary(state, CanaryOutcome(ok=True, before=None, after=None, ended=15.0))


def test_healthy_pod_is_ready() -> None:
    verdict = judge(healthy(), now=16.0, cfg=CFG)
    assert (verdict.ready, verdict.reason, verdict.roll) == (True, "CanaryPassing", None)


def test_config_mismatch_keeps_the_pod_out_without_a_roll() -> None:
    state = replace(healthy(), mismatches=("speculative: expected 7 draft tokens, engine reports off",))
    verdict = judge(state, now=16.0, cfg=CFG)
    assert (verdict.ready, verdict.reason, verdict.roll) == (False, "ConfigMismatch", None)


def test_unchecked_config_is_not_ready() -> None:
    assert judge(replace(healthy(), mismatches=None), now=16.0, cfg=CFG).reason == "CheckingConfig"


def test_silent_engine_is_not_ready() -> None:
    assert judge(healthy(), now=60.0, cfg=CFG).reason == "EngineNotAnswering"
    assert judge(PodHealth(), now=0.0, cfg=CFG).reason == "EngineNotAnswering"


def test_slow_metrics_do_not_unready_an_engine_whose_canary_gets_tokens() -> None:
    # seen on the real engine (2 cores, 8 clients behind 2 slots): scrapes unanswered for 15 s+, canaries pass
    state = healthy()
    stale = state.samples[-1].t + 3 * CFG.scrape_interval_seconds + 1.0
    answered = replace(state, last_canary=stale - 1.0, canary_failures=0)
    assert judge(answered, now=stale, cfg=CFG).reason == "CanaryPassing"
    failing = replace(answered, canary_failures=1)
    assert judge(failing, now=stale, cfg=CFG).reason == "EngineNotAnswering"
    cycle = CFG.canary.period_seconds + CFG.canary.timeout_seconds + 2 * CFG.scrape_timeout_seconds
    long_ago = replace(state, last_canary=stale - 3 * CFG.scrape_interval_seconds - cycle - 1.0)
    assert judge(long_ago, now=stale, cfg=CFG).reason == "EngineNotAnswering"


def test_a_canary_still_on_its_way_back_keeps_a_slow_metrics_engine_ready() -> None:
    """The next canary was sent a period after the last one ended and is queued behind busy slots (its scrape
    before it, then up to its timeout, then its scrape after): until that whole cycle is over the last canary
    still speaks for the engine. With the default config that is 10 + 10 + 2 x 3 = 26 s after it ended."""
    state = healthy()
    stale = state.samples[-1].t + 3 * CFG.scrape_interval_seconds + 1.0
    for age, reason in ((25.0, "CanaryPassing"), (3 * CFG.scrape_interval_seconds + 26.0, "CanaryPassing")):
        assert judge(replace(state, last_canary=stale - age), now=stale, cfg=CFG).reason == reason, age
    too_old = replace(state, last_canary=stale - 3 * CFG.scrape_interval_seconds - 26.5)
    assert judge(too_old, now=stale, cfg=CFG).reason == "EngineNotAnswering"


def test_stall_asks_for_a_roll() -> None:
    state = healthy()
    frozen = busy(15.0, 300.0)
    for i in range(1, 9):
        state = fold_sample(state, replace(frozen, t=15.0 + i * 5), cfg=CFG)
    verdict = judge(state, now=55.0, cfg=CFG)
    assert (verdict.ready, verdict.reason, verdict.roll) == (False, "Stalled", RollReason.STALLED)


def test_canary_failures_count_only_without_progress() -> None:
    state = replace(healthy(), canary_failures=2)
    before = state.samples[-1]
    queued = CanaryOutcome(ok=False, before=before, after=busy(20.0, 500.0), ended=20.0)
    assert queued.queued
    assert fold_canary(state, queued).canary_failures == 0
    stuck = state
    for _ in range(3):
        stuck = fold_canary(stuck, CanaryOutcome(ok=False, before=before, after=replace(before, t=20.0), ended=20.0))
    assert stuck.canary_failures == 5
    assert judge(replace(stuck, ready_since=1.0), now=16.0, cfg=CFG).reason == "CanaryFailing"


def test_first_canary_must_pass_before_ready() -> None:
    state = fold_canary(
        replace(healthy(), last_canary=None), CanaryOutcome(ok=False, before=None, after=None, ended=15.0)
    )
    assert judge(state, now=16.0, cfg=CFG).reason == "AwaitingCanary"


def test_ready_since_is_kept_while_ready_and_reset_when_not() -> None:
    ready = judge(healthy(), now=16.0, cfg=CFG)
    state = mark_ready(healthy(), ready, now=16.0)
    assert state.ready_since == 16.0
    assert mark_ready(state, ready, now=20.0).ready_since == 16.0
    down = judge(replace(state, mismatches=("x",)), now=20.0, cfg=CFG)
    assert mark_ready(state, down, now=20.0).ready_since is None


def test_an_hour_of_scrapes_keeps_only_what_the_detectors_read() -> None:
    state = PodHealth(mismatches=())
    for i in range(720):  # an hour at the default 5 s scrape
        state = fold_sample(state, busy(i * 5.0, i * 100.0), cfg=CFG)
    kept = [s.t for s in state.samples]
    # four stall windows (4 x 30 s) back from the last scrape, not the 240 scrapes (20 minutes) of before
    assert kept == [3595.0 - 120.0 + 5.0 * i for i in range(25)]


def test_a_stall_longer_than_the_kept_span_still_says_since_when() -> None:
    state = healthy()
    frozen = busy(15.0, 300.0)
    for i in range(1, 121):  # ten minutes without progress, the roll refused meanwhile
        state = fold_sample(state, replace(frozen, t=15.0 + i * 5), cfg=CFG)
    assert len(state.samples) <= 27
    verdict = judge(state, now=615.0, cfg=CFG)
    assert (verdict.reason, verdict.roll) == ("Stalled", RollReason.STALLED)
    assert "no forward progress for 600s" in verdict.message


def test_stale_samples_with_a_fresh_canary_are_not_a_stall() -> None:
    """Busy samples, then /metrics silent for 20 s while canaries keep getting tokens: neither EngineNotAnswering
    nor Stalled (a frozen span measured to now would be the operator's own silence, not the engine's)."""
    state = PodHealth(mismatches=())
    for i in range(4):
        state = fold_sample(state, busy(i * 5.0, i * 100.0), cfg=CFG)
    last = state.samples[-1].t
    state = fold_canary(state, CanaryOutcome(ok=True, before=None, after=None, ended=last + 18.0))
    verdict = judge(state, now=last + 20.0 + CFG.stall.window_seconds, cfg=CFG)
    assert (verdict.reason, verdict.roll) == ("CanaryPassing", None)
    failing = replace(state, canary_failures=1)
    assert judge(failing, now=last + 20.0 + CFG.stall.window_seconds, cfg=CFG).reason == "EngineNotAnswering"


def test_the_kv_transfer_rule_applies_only_to_the_decode_engine_the_machine_is_told_of() -> None:
    """Requests `deferred` with a slot free and no transfer completing, while the engine generates: a decode
    engine (decode_slots given) is Stalled and rolled; any other engine with the same series is passing
    (its `deferred` is grammar, LoRA or streaming waits, vllm/v1/core/sched/scheduler.py:1854-1858)."""
    state = PodHealth(mismatches=(), last_canary=0.0)
    for i in range(20):
        sample = EngineSample(t=i * 5.0, running=2, waiting=3, deferred=3, generation_tokens=i * 100.0, iterations=i)
        state = fold_sample(state, sample, cfg=CFG)
    now = state.samples[-1].t
    decode = judge(replace(state, last_canary=now), now=now, cfg=CFG, decode_slots=32)
    assert (decode.reason, decode.roll) == ("Stalled", RollReason.STALLED)
    assert "waiting for their KV" in decode.message
    assert judge(replace(state, last_canary=now), now=now, cfg=CFG).reason == "CanaryPassing"
    full = judge(replace(state, last_canary=now), now=now, cfg=CFG, decode_slots=2)  # every slot runs
    assert full.reason == "CanaryPassing"


def test_unanswered_scrapes_shorter_than_the_silence_rule_are_no_stall_with_a_short_window() -> None:
    """A stall window under three scrape intervals (the real-engine tier's 10 s at a 5 s scrape) and a busy
    engine whose /metrics then goes unanswered for 11 s (a loaded host): not yet EngineNotAnswering (three
    intervals), and never Stalled, since nothing answered shows a frozen engine. Measured to now, the span
    after the last answer was called a stall and the pod rolled (a warm CI run, 2026-12-05)."""
    cfg = HealthSpec(canary=CanarySpec(failure_threshold=3), stall={"window_seconds": 10.0})
    state = PodHealth(mismatches=())
    for i in range(4):
        state = fold_sample(state, busy(i * 5.0, i * 100.0), cfg=cfg)
    state = fold_canary(state, CanaryOutcome(ok=True, before=None, after=None, ended=0.0))  # long ago
    last = state.samples[-1].t
    verdict = judge(state, now=last + 11.0, cfg=cfg)
    assert (verdict.reason, verdict.roll) == ("CanaryPassing", None)
    # answered scrapes that show no progress for the window still are a stall
    for i in range(1, 4):
        state = fold_sample(state, busy(last + i * 5.0, 300.0), cfg=cfg)
    assert judge(state, now=last + 15.0, cfg=cfg).roll == RollReason.STALLED
