"""One scrape of an engine's /metrics, reduced to what the detectors and the status need.

Parsed with prometheus-client's own text parser. Metric names are vLLM V1's (vllm/v1/metrics/loggers.py,
vllm/v1/spec_decode/metrics.py); series of several engines in one pod (DP > 1) are summed, gauges of
usage take the highest engine, because one full engine is what stalls.
"""

from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from ascend_operator.health import progress as prog

Buckets = tuple[tuple[float, float], ...]
"""Cumulative histogram buckets: (upper bound, count), sorted, +Inf last."""


@dataclass(frozen=True, kw_only=True)
class EngineSample:
    """Engine state at one instant `t` (seconds on the operator's monotonic clock)."""

    t: float
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    iterations: float = 0.0
    """Engine steps: the count of the `vllm:iteration_tokens_total` histogram."""
    preemptions: float = 0.0
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    spec_drafts: float | None = None
    spec_draft_tokens: float | None = None
    spec_accepted: float | None = None
    spec_accepted_per_pos: dict[int, float] | None = None
    ttft: Buckets = ()
    tpot: Buckets = ()
    cache_config: dict[str, str] = field(default_factory=dict)

    @property
    def progress(self) -> dict[str, float]:
        """This sample's progress signals, keyed as `ascend_operator.health.progress` reads them."""
        return {
            "vllm:generation_tokens_total": self.generation_tokens,
            "vllm:prompt_tokens_total": self.prompt_tokens,
            "vllm:iteration_tokens_total_count": self.iterations,
            prog.KV_GAUGE: self.kv_usage,
        }


def _value(family: Metric, suffix: str = "") -> float:
    return sum(s.value for s in family.samples if s.name == family.name + suffix)


def _buckets(family: Metric) -> Buckets:
    merged: dict[float, float] = {}
    for s in family.samples:
        if s.name == family.name + "_bucket":
            bound = float(s.labels["le"])
            merged[bound] = merged.get(bound, 0.0) + s.value
    return tuple(sorted(merged.items()))


def _per_position(family: Metric) -> dict[int, float]:
    out: dict[int, float] = {}
    for s in family.samples:
        if s.name.endswith("_total") and "position" in s.labels:
            pos = int(s.labels["position"])
            out[pos] = out.get(pos, 0.0) + s.value
    return out


def parse_metrics(text: str, *, t: float) -> EngineSample:
    """Parse a vLLM /metrics body."""
    fam: dict[str, Metric] = {f.name: f for f in text_string_to_metric_families(text)}

    def counter(name: str) -> float:
        return _value(fam[name], "_total") if name in fam else 0.0

    def gauge_max(name: str) -> float:
        values = [s.value for s in fam[name].samples] if name in fam else []
        return max(values, default=0.0)

    spec = "vllm:spec_decode_num_drafts" in fam
    config = fam.get("vllm:cache_config_info")
    return EngineSample(
        t=t,
        running=_value(fam["vllm:num_requests_running"]) if "vllm:num_requests_running" in fam else 0.0,
        waiting=_value(fam["vllm:num_requests_waiting"]) if "vllm:num_requests_waiting" in fam else 0.0,
        kv_usage=gauge_max("vllm:kv_cache_usage_perc"),
        prompt_tokens=counter("vllm:prompt_tokens"),
        generation_tokens=counter("vllm:generation_tokens"),
        iterations=_value(fam["vllm:iteration_tokens_total"], "_count")
        if "vllm:iteration_tokens_total" in fam
        else 0.0,
        preemptions=counter("vllm:num_preemptions"),
        prefix_queries=counter("vllm:prefix_cache_queries"),
        prefix_hits=counter("vllm:prefix_cache_hits"),
        spec_drafts=counter("vllm:spec_decode_num_drafts") if spec else None,
        spec_draft_tokens=counter("vllm:spec_decode_num_draft_tokens") if spec else None,
        spec_accepted=counter("vllm:spec_decode_num_accepted_tokens") if spec else None,
        spec_accepted_per_pos=_per_position(fam["vllm:spec_decode_num_accepted_tokens_per_pos"])
        if "vllm:spec_decode_num_accepted_tokens_per_pos" in fam
        else None,
        ttft=_buckets(fam["vllm:time_to_first_token_seconds"]) if "vllm:time_to_first_token_seconds" in fam else (),
        tpot=_buckets(fam["vllm:request_time_per_output_token_seconds"])
        if "vllm:request_time_per_output_token_seconds" in fam
        else (),
        cache_config=dict(config.samples[0].labels) if config and config.samples else {},
    )


def advanced(before: EngineSample | None, after: EngineSample | None) -> bool:
    """Forward progress between two samples, by the one definition (`ascend_operator.health.progress`)."""
    return prog.advanced(before.progress if before else None, after.progress if after else None)
