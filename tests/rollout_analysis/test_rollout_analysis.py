"""The comparison that decides a judged rollout (ascend_operator/rollout_analysis): a table of windows
as the health pass scrapes them, and the verdict a user would see in status.rollout."""

import pytest

from ascend_operator.api.rollout import AnalysisThresholds
from ascend_operator.health.samples import EngineSample
from ascend_operator.rollout_analysis import Figures, Input, Outcome, figures, judge

BOUNDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))


def _hist(values: list[float]) -> tuple[tuple[float, float], ...]:
    return tuple((b, float(sum(1 for v in values if v <= b))) for b in BOUNDS)


def _pod(*, requests: int, ttft: float, tpot: float, tokens_per_s: float, running: float, waiting: float,
         seconds: float = 60.0, errors: float = 0.0) -> list[EngineSample]:  # fmt: skip
    """Two scrapes `seconds` apart: `requests` first tokens at `ttft`, decode at `tpot`, in between; as many
    requests finished, `errors` of them with an engine error (finished_reason "error")."""
    start = EngineSample(t=0.0, running=running, waiting=waiting, ttft=_hist([]), tpot=_hist([]))
    end = EngineSample(
        t=seconds,
        running=running,
        waiting=waiting,
        finished=requests + errors,
        errored=errors,
        generation_tokens=tokens_per_s * seconds,
        ttft=_hist([ttft] * requests),
        tpot=_hist([tpot] * requests * 50),
    )
    return [start, end]


BASE = {"requests": 60, "ttft": 0.3, "tpot": 0.03, "tokens_per_s": 400.0, "running": 12.0, "waiting": 0.0}


def _verdict(canary: dict[str, float], *, baselines: int = 2, failures: int = 0) -> tuple[Outcome, str]:
    base = figures([_pod(**BASE) for _ in range(baselines)])  # type: ignore[arg-type]
    new = figures([_pod(**{**BASE, **canary})], canary_failures=failures)  # type: ignore[arg-type]
    v = judge(Input(canary=new, baseline=base, thresholds=AnalysisThresholds()))
    return v.outcome, v.signal


@pytest.mark.parametrize(
    ("canary", "failures", "expected"),
    [
        ({}, 0, (Outcome.PASSED, "")),
        # noise within the thresholds: a little slower everywhere still passes
        ({"ttft": 0.4, "tpot": 0.035, "tokens_per_s": 350.0, "waiting": 1.0}, 0, (Outcome.PASSED, "")),
        # maxNumSeqs 32 -> 4 under C24: the queue holds users before their first token
        ({"ttft": 4.0, "running": 4.0, "waiting": 8.0, "tokens_per_s": 140.0}, 0, (Outcome.FAILED, "TTFT")),
        ({"tpot": 0.06}, 0, (Outcome.FAILED, "TPOT")),  # a slower image per token
        ({"tokens_per_s": 200.0}, 0, (Outcome.FAILED, "TokensPerRequest")),
        ({"waiting": 5.0}, 0, (Outcome.FAILED, "Queue")),
        # engine errors (500s): a share above the baseline's by more than 2% fails, one error never decides,
        # and a revision that errors before any first token is judged, not waited for
        ({"errors": 5}, 0, (Outcome.FAILED, "Errors")),
        ({"errors": 1}, 0, (Outcome.PASSED, "")),
        ({"requests": 0, "errors": 30}, 0, (Outcome.FAILED, "Errors")),
        ({}, 1, (Outcome.FAILED, "CanaryFailures")),  # generation canaries failed: whatever the traffic
        ({"requests": 3}, 1, (Outcome.FAILED, "CanaryFailures")),
        # too little traffic on either side: extend the window, never guess
        ({"requests": 5, "ttft": 9.0}, 0, (Outcome.EXTEND, "TooLittleTraffic")),
    ],
)
def test_verdicts(canary: dict[str, float], failures: int, expected: tuple[Outcome, str]) -> None:
    assert _verdict(canary, failures=failures) == expected


def test_a_quiet_baseline_extends_the_window() -> None:
    base = figures([_pod(**{**BASE, "requests": 10}) for _ in range(2)])  # type: ignore[arg-type]
    new = figures([_pod(**BASE)])  # type: ignore[arg-type]
    assert judge(Input(canary=new, baseline=base, thresholds=AnalysisThresholds())).outcome is Outcome.EXTEND


def test_tiny_latencies_twice_as_slow_are_not_worse() -> None:
    """20 ms against 10 ms TTFT is a ratio, not a user-visible difference."""
    fast = Figures(replicas=1, seconds=60, requests=100, ttft_p90=0.01, tpot_p90=0.001, tokens_per_request=30)
    slow = Figures(replicas=1, seconds=60, requests=100, ttft_p90=0.02, tpot_p90=0.002, tokens_per_request=30)
    assert judge(Input(canary=slow, baseline=fast, thresholds=AnalysisThresholds())).outcome is Outcome.PASSED


def test_the_failed_verdict_carries_both_values() -> None:
    base = figures([_pod(**BASE), _pod(**BASE)])  # type: ignore[arg-type]
    new = figures([_pod(**{**BASE, "ttft": 4.0})])  # type: ignore[arg-type]
    v = judge(Input(canary=new, baseline=base, thresholds=AnalysisThresholds()))
    assert v.signal == "TTFT"
    assert v.canary is not None
    assert v.baseline is not None
    assert v.canary > 2.5
    assert v.baseline < 0.5
    assert "TTFT p90" in v.message


def test_figures_merge_pods_and_read_rates() -> None:
    f = figures([_pod(**BASE), _pod(**{**BASE, "waiting": 2.0})])  # type: ignore[arg-type]
    assert f.replicas == 2
    assert f.requests == 120
    assert f.tokens_per_request == pytest.approx(800 / 24)
    assert f.waiting == pytest.approx(1.0)
    assert (f.finished, f.errors) == (120, 0)


def test_engine_errors_are_read_from_vllms_request_success_counter() -> None:
    """vLLM 0.25.1 counts an errored request as vllm:request_success{finished_reason="error"} (loggers.py:676-
    690; FinishReason.ERROR, v1/engine/__init__.py:42-61): the scrape reads it beside the other reasons."""
    from ascend_operator.health.samples import parse_metrics

    text = (
        "# HELP vllm:request_success_total Count of successfully processed requests.\n"
        "# TYPE vllm:request_success_total counter\n"
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 7.0\n'
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0\n'
        'vllm:request_success_total{engine="0",finished_reason="error",model_name="m"} 3.0\n'
    )
    sample = parse_metrics(text, t=0.0)
    assert (sample.finished, sample.errored) == (12.0, 3.0)
