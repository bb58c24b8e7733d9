"""The engine figures the autoscaler reads that the status does not already compute: TTFT and TPOT p90 over
the service's recent scrapes, from the engines' own histograms (bucket increases over the window, merged over
pods: a quantile of the service's requests, not an average of the pods' quantiles), and a P/D prefill pool's
mean prompt length (prompt tokens over first tokens in the same window: vLLM counts a request's prompt
tokens and observes its TTFT in the same step, when its prefill ends, vllm/v1/metrics/stats.py
IterationStats.update_from_output)."""

from collections.abc import Callable, Sequence

from ascend_operator.health.aggregate import WINDOW_SECONDS
from ascend_operator.health.rates import bucket_delta, quantile
from ascend_operator.health.samples import Buckets, EngineSample


def _recent(samples: Sequence[EngineSample], now: float) -> list[EngineSample]:
    return [s for s in samples if s.t >= now - WINDOW_SECONDS]


def _merged(pods: Sequence[Sequence[EngineSample]], read: Callable[[EngineSample], Buckets], now: float) -> Buckets:
    merged: dict[float, float] = {}
    for samples in pods:
        recent = _recent(samples, now)
        if len(recent) < 2:
            continue
        for bound, count in bucket_delta(read(recent[0]), read(recent[-1])):
            merged[bound] = merged.get(bound, 0.0) + count
    return tuple(sorted(merged.items()))


def _quantile(
    pods: Sequence[Sequence[EngineSample]], read: Callable[[EngineSample], Buckets], now: float, q: float
) -> float | None:
    buckets = _merged(pods, read, now)
    return quantile(buckets, q) if buckets and buckets[-1][1] > 0 else None


def ttft_quantile(pods: Sequence[Sequence[EngineSample]], *, now: float, q: float = 0.9) -> float | None:
    """TTFT quantile `q` of the requests that got their first token over the last window; None without any."""
    return _quantile(pods, lambda s: s.ttft, now, q)


def tpot_quantile(pods: Sequence[Sequence[EngineSample]], *, now: float, q: float = 0.9) -> float | None:
    """TPOT quantile `q` of the output tokens of the last window; None without any."""
    return _quantile(pods, lambda s: s.tpot, now, q)


def mean_prompt_tokens(pods: Sequence[Sequence[EngineSample]], *, now: float) -> float | None:
    """Prompt tokens per request whose prefill ended over the last window; None without any."""
    tokens = firsts = 0.0
    for samples in pods:
        recent = _recent(samples, now)
        if len(recent) < 2:
            continue
        tokens += max(0.0, recent[-1].prompt_tokens - recent[0].prompt_tokens)
        delta = bucket_delta(recent[0].ttft, recent[-1].ttft)
        firsts += delta[-1][1] if delta else 0.0
    return tokens / firsts if firsts > 0 else None
