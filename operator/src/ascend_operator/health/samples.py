"""One scrape of an engine's /metrics, reduced to what the detectors and the status need.

Parsed with prometheus-client's own text parser. Metric names come from the engine contract
(`ascend_operator.contract.vllm_metrics`, held against vllm/v1/metrics by tests/contract/), which also says
when each moves: the iteration histogram and the token counters only on steps that return outputs.
Series of several engines in one pod (DP > 1) are summed, gauges of usage take the highest engine,
because one full engine is what stalls. Each engine's own progress series are kept as well (`ranks`),
because a sum hides one stalled rank among progressing ones: vLLM 0.25.1 labels every series with
`engine` = the DP rank (vllm/v1/metrics/loggers.py:431-437, one label value per index the frontend
manages), and with multi-node DP the leader's API server manages every rank, the ranks of `--headless`
nodes included (vllm/v1/engine/core_client.py:600-605: all `data_parallel_size` ranks unless hybrid or
external load balancing; vllm/v1/engine/async_llm.py:158-160 makes one logger per managed rank and
async_llm.py:696-698 records each output batch under its `engine_index`). Headless nodes run no API
server (vllm/entrypoints/cli/serve.py:173-240), so the leader's /metrics is the only place they show.
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from ascend_operator.canary import progress as prog
from ascend_operator.contract import vllm_metrics as M

Buckets = tuple[tuple[float, float], ...]
"""Cumulative histogram buckets: (upper bound, count), sorted, +Inf last."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RankSample:
    """One DP rank's scheduler gauges and progress counters within a scrape (its `engine` label)."""

    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    iterations: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineSample:
    """Engine state at one instant `t` (seconds on the operator's monotonic clock)."""

    t: float
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    iterations: float = 0.0
    """Steps that returned outputs (vLLM has no step counter): the count of `vllm:iteration_tokens_total`.
    A lone chunked prefill moves it only when the prefill completes."""
    deferred: float = 0.0
    """Waiting requests the scheduler passes over (`vllm:num_requests_waiting_by_reason{reason="deferred"}`):
    on a decode engine, requests waiting for their KV from a prefill engine."""
    external_prompt_tokens: float = 0.0
    """Prompt tokens whose KV arrived from another engine (`prompt_tokens_by_source{source=
    "external_kv_transfer"}`): it advances each time a decode engine's transfer completed."""
    preemptions: float = 0.0
    finished: float = 0.0
    """Requests the engine finished, for any reason (`vllm:request_success_total`)."""
    errored: float = 0.0
    """Of those, finished with an engine error (`finished_reason="error"`: always a 500 to the client)."""
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    spec_drafts: float | None = None
    spec_draft_tokens: float | None = None
    spec_accepted: float | None = None
    spec_accepted_per_pos: dict[int, float] | None = None
    ttft: Buckets = ()
    tpot: Buckets = ()
    cache_config: dict[str, str] = field(default_factory=dict)
    ranks: dict[str, RankSample] = field(default_factory=dict)
    """Per DP rank (the `engine` label value, vLLM's DP rank index); empty when no series carries one."""

    @property
    def progress(self) -> dict[str, float]:
        """This sample's progress signals, keyed as `ascend_operator.canary.progress` reads them."""
        return {
            "vllm:generation_tokens_total": self.generation_tokens,
            "vllm:prompt_tokens_total": self.prompt_tokens,
            "vllm:iteration_tokens_total_count": self.iterations,
            prog.KV_GAUGE: self.kv_usage,
        }


def _value(family: Metric, suffix: str = "") -> float:
    return sum(s.value for s in family.samples if s.name == family.name + suffix)


def _labelled(family: Metric | None, label: str, value: str) -> float:
    """The samples of `family` whose `label` is `value`, summed over engines (0 when absent)."""
    if family is None:
        return 0.0
    return sum(s.value for s in family.samples if s.labels.get(label) == value and not s.name.endswith("_created"))


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


def _by_engine(family: Metric | None, suffix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if family is None:
        return out
    for s in family.samples:
        if s.name == family.name + suffix and "engine" in s.labels:
            out[s.labels["engine"]] = out.get(s.labels["engine"], 0.0) + s.value
    return out


def _ranks(fam: Mapping[str, Metric]) -> dict[str, RankSample]:
    """Each engine's series: gauges, and counters summed over their other labels."""
    series = {
        "running": _by_engine(fam.get(M.NUM_REQUESTS_RUNNING.name)),
        "waiting": _by_engine(fam.get(M.NUM_REQUESTS_WAITING.name)),
        "kv_usage": _by_engine(fam.get(M.KV_CACHE_USAGE.name)),
        "prompt_tokens": _by_engine(fam.get(M.PROMPT_TOKENS.name), "_total"),
        "generation_tokens": _by_engine(fam.get(M.GENERATION_TOKENS.name), "_total"),
        "iterations": _by_engine(fam.get(M.ITERATION_TOKENS.name), "_count"),
    }
    engines = sorted({e for values in series.values() for e in values}, key=_rank_order)
    return {e: RankSample(**{k: v.get(e, 0.0) for k, v in series.items()}) for e in engines}


def _rank_order(engine: str) -> tuple[int, str]:
    return (int(engine), "") if engine.isdigit() else (1 << 30, engine)


def rank_view(sample: EngineSample, engine: str) -> EngineSample | None:
    """One rank of a scrape as a sample of its own (so the stall chain judges it like an engine), or None
    when the scrape has no series of that rank."""
    rank = sample.ranks.get(engine)
    if rank is None:
        return None
    return EngineSample(
        t=sample.t,
        running=rank.running,
        waiting=rank.waiting,
        kv_usage=rank.kv_usage,
        prompt_tokens=rank.prompt_tokens,
        generation_tokens=rank.generation_tokens,
        iterations=rank.iterations,
    )


#: Family -> the sample names of it this module reads. A vLLM exposition carries ~20 more histograms
#: (request latency phases, token counts; the iteration histogram's buckets) the detectors never read;
#: they are dropped before prometheus-client's pure-Python parser sees them, which costs ~10 ms per DP
#: rank per scrape on the whole text (perf/pod_memory.py measures both).
READ: dict[str, frozenset[str]] = {
    **{
        m.name: frozenset({m.name})
        for m in (M.NUM_REQUESTS_RUNNING, M.NUM_REQUESTS_WAITING, M.NUM_REQUESTS_WAITING_BY_REASON, M.KV_CACHE_USAGE)
    },
    **{
        m.name: frozenset({m.name + "_total"})
        for m in (
            M.PROMPT_TOKENS,
            M.PROMPT_TOKENS_BY_SOURCE,
            M.GENERATION_TOKENS,
            M.NUM_PREEMPTIONS,
            M.PREFIX_CACHE_QUERIES,
            M.PREFIX_CACHE_HITS,
            M.REQUEST_SUCCESS,
            M.SPEC_DECODE_NUM_DRAFTS,
            M.SPEC_DECODE_NUM_DRAFT_TOKENS,
            M.SPEC_DECODE_NUM_ACCEPTED_TOKENS,
            M.SPEC_DECODE_ACCEPTED_PER_POS,
        )
    },
    M.ITERATION_TOKENS.name: frozenset({M.ITERATION_TOKENS.name + "_count"}),
    **{m.name: frozenset({m.name + "_bucket"}) for m in (M.TIME_TO_FIRST_TOKEN, M.TIME_PER_OUTPUT_TOKEN)},
    M.CACHE_CONFIG_INFO.name: frozenset({M.CACHE_CONFIG_INFO.name}),
}
_SAMPLES = frozenset().union(*READ.values())


def relevant(text: str) -> str:
    """The lines of `text` this module reads: its families' # HELP / # TYPE lines and their samples."""
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(" ", 3)
            # prometheus-client names a counter's HELP and TYPE lines with its `_total` sample name
            if len(parts) > 2 and (parts[2] in READ or parts[2].removesuffix("_total") in READ):
                kept.append(line)
            continue
        end = line.find("{")
        name = line[:end] if end >= 0 else line.partition(" ")[0]
        if name in _SAMPLES:
            kept.append(line)
    return "\n".join(kept) + "\n"


def families(text: str) -> dict[str, Metric]:
    """The metric families of a Prometheus text exposition, by name (every one of them)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def parse_metrics(text: str, *, t: float) -> EngineSample:
    """Parse a vLLM /metrics body."""
    return sample_of(families(relevant(text)), t=t)


def sample_of(fam: Mapping[str, Metric], *, t: float) -> EngineSample:
    """The sample of parsed families."""

    def counter(name: str) -> float:
        return _value(fam[name], "_total") if name in fam else 0.0

    def gauge_max(name: str) -> float:
        values = [s.value for s in fam[name].samples] if name in fam else []
        return max(values, default=0.0)

    spec = M.SPEC_DECODE_NUM_DRAFTS.name in fam
    config = fam.get(M.CACHE_CONFIG_INFO.name)
    return EngineSample(
        t=t,
        running=_value(fam[M.NUM_REQUESTS_RUNNING.name]) if M.NUM_REQUESTS_RUNNING.name in fam else 0.0,
        waiting=_value(fam[M.NUM_REQUESTS_WAITING.name]) if M.NUM_REQUESTS_WAITING.name in fam else 0.0,
        kv_usage=gauge_max(M.KV_CACHE_USAGE.name),
        prompt_tokens=counter(M.PROMPT_TOKENS.name),
        generation_tokens=counter(M.GENERATION_TOKENS.name),
        iterations=_value(fam[M.ITERATION_TOKENS.name], "_count") if M.ITERATION_TOKENS.name in fam else 0.0,
        deferred=_labelled(fam.get(M.NUM_REQUESTS_WAITING_BY_REASON.name), "reason", "deferred"),
        external_prompt_tokens=_labelled(fam.get(M.PROMPT_TOKENS_BY_SOURCE.name), "source", "external_kv_transfer"),
        preemptions=counter(M.NUM_PREEMPTIONS.name),
        finished=counter(M.REQUEST_SUCCESS.name),
        errored=_labelled(fam.get(M.REQUEST_SUCCESS.name), "finished_reason", "error"),
        prefix_queries=counter(M.PREFIX_CACHE_QUERIES.name),
        prefix_hits=counter(M.PREFIX_CACHE_HITS.name),
        spec_drafts=counter(M.SPEC_DECODE_NUM_DRAFTS.name) if spec else None,
        spec_draft_tokens=counter(M.SPEC_DECODE_NUM_DRAFT_TOKENS.name) if spec else None,
        spec_accepted=counter(M.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name) if spec else None,
        spec_accepted_per_pos=_per_position(fam[M.SPEC_DECODE_ACCEPTED_PER_POS.name])
        if M.SPEC_DECODE_ACCEPTED_PER_POS.name in fam
        else None,
        ttft=_buckets(fam[M.TIME_TO_FIRST_TOKEN.name]) if M.TIME_TO_FIRST_TOKEN.name in fam else (),
        tpot=_buckets(fam[M.TIME_PER_OUTPUT_TOKEN.name]) if M.TIME_PER_OUTPUT_TOKEN.name in fam else (),
        cache_config=_config(tuple(config.samples[0].labels.items())) if config and config.samples else {},
        ranks=_ranks(fam),
    )


@functools.lru_cache(maxsize=256)
def _config(labels: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """One shared dict per distinct cache config: every scrape of an engine carries the same ~17 labels,
    and each pod keeps dozens of scrapes. Shared, so never changed by a reader."""
    return dict(labels)


def advanced(before: EngineSample | None, after: EngineSample | None) -> bool:
    """Forward progress between two samples, by the one definition (`ascend_operator.canary.progress`)."""
    return prog.advanced(before.progress if before else None, after.progress if after else None)
