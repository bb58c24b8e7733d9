"""The contract's metrics against vLLM 0.25.1's Prometheus loggers: name, type, labels, update moment."""

import ast
import re

import pytest

from ascend_operator.contract import additional_config as keys
from ascend_operator.contract import vllm_metrics as M
from tests.contract.upstream import metric_names, read_upstream

_CLS = {
    M.MetricType.COUNTER: "_counter_cls",
    M.MetricType.GAUGE: "_gauge_cls",
    M.MetricType.HISTOGRAM: "_histogram_cls",
}


def _lines(source: str) -> tuple[list[str], int]:
    rel, _, line = source.rpartition(":")
    return read_upstream(rel).splitlines(), int(line) - 1


@pytest.mark.parametrize("metric", M.READ, ids=lambda m: m.name)
def test_metric_exists_where_cited(metric: M.Metric) -> None:
    names = metric_names()
    assert metric.name in names, f"{metric.name} is not exported by vllm/v1/metrics or spec_decode"
    lines, i = _lines(metric.source)
    assert metric.name in lines[i], f"{metric.source} does not name {metric.name}: {lines[i]!r}"


@pytest.mark.parametrize("metric", M.READ, ids=lambda m: m.name)
def test_metric_type(metric: M.Metric) -> None:
    lines, i = _lines(metric.source)
    before, after = "\n".join(lines[max(0, i - 3) : i + 1]), "\n".join(lines[i : i + 12])
    if metric.name.startswith("vllm:spec_decode") and metric is not M.SPEC_DECODE_ACCEPTED_PER_POS:
        before = after  # (name, doc) tuples, built by one _counter_cls below
    if metric is M.CACHE_CONFIG_INFO:
        before = after  # the name is picked first, the gauge built after it
    assert _CLS[metric.type] in before, f"{metric.name} is not built with {_CLS[metric.type]}"


@pytest.mark.parametrize("metric", [m for m in M.READ if m.labels == M.ENGINE_LABELS], ids=lambda m: m.name)
def test_engine_labels(metric: M.Metric) -> None:
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    assert 'labelnames = ["model_name", "engine"]' in loggers
    lines, i = _lines(metric.source)
    first = next(line for line in lines[i : i + 60] if "labelnames=" in line)
    assert re.search(r"labelnames=labelnames[,)]", first), f"{metric.name}: labels are not exactly {M.ENGINE_LABELS}"


def test_finished_reason_label() -> None:
    lines, i = _lines(M.REQUEST_SUCCESS.source)
    assert 'labelnames=labelnames + ["finished_reason"],' in lines[i + 2]
    assert M.REQUEST_SUCCESS.labels == (*M.ENGINE_LABELS, "finished_reason")


def test_per_position_label() -> None:
    text = read_upstream("vllm/v1/spec_decode/metrics.py")
    assert 'pos_labelnames = labelnames + ["position"]' in text
    assert "for pos in range(num_spec_tokens)" in text


def test_cache_config_info_labels_are_cache_config_fields_and_engine() -> None:
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    assert 'metrics_info["engine"] = str(engine_index)' in loggers
    assert "labelnames=metrics_info.keys()" in loggers
    cache = ast.parse(read_upstream("vllm/config/cache.py"))
    cls = next(n for n in ast.walk(cache) if isinstance(n, ast.ClassDef) and n.name == "CacheConfig")
    fields = [
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign)
        and isinstance(n.target, ast.Name)
        and "ClassVar" not in ast.unparse(n.annotation)
    ]
    assert tuple(fields) == M.CACHE_CONFIG_LABELS
    assert "return {key: str(value) for key, value in self.__dict__.items()}" in read_upstream("vllm/config/cache.py")


def test_iteration_stats_only_for_steps_with_outputs() -> None:
    """No IterationStats for an output-less step: histogram, prompt and generation counters stay flat."""
    text = read_upstream("vllm/v1/engine/async_llm.py")
    assert re.search(r"IterationStats\(\) if \(log_stats and num_outputs\) else None", text)
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    record = loggers[loggers.index("def record(") :]
    body = record[record.index("if iteration_stats is None:") :] if "if iteration_stats is None:" in record else record
    assert "self.histogram_iteration_tokens[engine_idx].observe(" in body
    assert "self.counter_prompt_tokens[engine_idx].inc(iteration_stats.num_prompt_tokens)" in body


def test_prompt_tokens_counted_at_prefill_completion() -> None:
    stats = read_upstream("vllm/v1/metrics/stats.py")
    start = stats.index("num_new_generation_tokens = len(output.new_token_ids)")
    block = stats[start : start + 600]
    assert "if is_prefilling:" in block
    assert "self.prompt_token_stats.update_from_output(output.prefill_stats)" in block


def test_kv_usage_from_every_steps_scheduler_stats() -> None:
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    assert "self.gauge_kv_cache_usage[engine_idx].set(scheduler_stats.kv_cache_usage)" in loggers
    assert M.KV_CACHE_USAGE.update is M.Update.EVERY_STEP
    assert M.ITERATION_TOKENS.update is M.Update.STEP_WITH_OUTPUTS
    assert M.PROMPT_TOKENS.update is M.Update.PREFILL_COMPLETE


def test_config_check_names_are_upstreams() -> None:
    assert {M.MODEL_ID, M.MODEL_MAX_LEN} <= set(M.MODEL_CARD_FIELDS)
    assert {M.CACHE_BLOCK_SIZE, M.CACHE_GPU_MEMORY_UTILIZATION} <= set(M.CACHE_CONFIG_LABELS)


def test_model_card_fields() -> None:
    proto = ast.parse(read_upstream("vllm/entrypoints/openai/engine/protocol.py"))
    cls = next(n for n in ast.walk(proto) if isinstance(n, ast.ClassDef) and n.name == "ModelCard")
    fields = tuple(n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))
    assert fields == M.MODEL_CARD_FIELDS
    assert cls.lineno == int(M.MODEL_CARD_SOURCE.rpartition(":")[2])


def test_reported_block_size_is_the_smallest_kv_cache_group() -> None:
    """`vllm:cache_config_info`'s block_size is resolved from the KV cache groups, then synced to the frontend."""
    lines, i = _lines(M.BLOCK_SIZE_REPORTED_SOURCE)
    assert "vllm_config.cache_config.block_size = min(" in lines[i]
    assert "g.kv_cache_spec.block_size for g in kv_cache_groups" in lines[i + 1]
    client = read_upstream("vllm/v1/engine/core_client.py").splitlines()
    assert "cache_config.block_size = response.block_size" in client[733]
    assert "block_size=self.vllm_config.cache_config.block_size," in read_upstream("vllm/v1/engine/core.py")
    assert M.USER_SPECIFIED_BLOCK_SIZE in M.CACHE_CONFIG_LABELS


def test_deepseek_v4_kv_cache_group_block_sizes_are_vllm_ascends() -> None:
    rel, _, line = M.DEEPSEEK_V4_KV_GROUP_SOURCE.rpartition(":")
    tree = ast.parse(read_upstream(rel, ascend=True))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_dsv4_block_sizes")
    tables = {
        t.id: (a.lineno, ast.literal_eval(a.value))
        for a in fn.body
        if isinstance(a, ast.Assign)
        for t in a.targets
        if isinstance(t, ast.Name)
    }
    lineno, a2 = tables["_DSV4_BLOCK_SIZES"]
    assert lineno == int(line)
    assert {size: tuple(groups) for size, (groups, _pads) in a2.items()} == M.DEEPSEEK_V4_KV_GROUP_BLOCK_SIZES
    _, a5 = tables["_DSV4_BLOCK_SIZES_A5"]
    assert {size: min(groups) for size, (groups, _pads) in a5.items()} == {
        size: min(groups) for size, groups in M.DEEPSEEK_V4_KV_GROUP_BLOCK_SIZES.items()
    }
    # Every block size vllm-ascend keeps for deepseek_v4 has its groups; each group size is one layer's spec.
    assert set(a2) == set(keys.DEEPSEEK_V4_BLOCK_SIZES)
    model = read_upstream("vllm_ascend/models/deepseek_v4.py", ascend=True)
    for group in range(4):
        assert re.search(rf"_dsv4_block_sizes\(\)\[(vllm_config\.)?cache_config\.block_size\]\[0\]\[{group}\]", model)


def test_no_series_counts_prefill_chunks_as_they_run() -> None:
    """Drift's prefill filter: the iteration histogram's prompt part is PrefillStats' computed tokens, which a
    request's first output carries; a decoding request returns one token a step plus its accepted drafts."""
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    assert re.search(
        r"histogram_iteration_tokens\[engine_idx\]\.observe\(\s*iteration_stats\.prompt_token_stats\.computed\s*"
        r"\+ iteration_stats\.num_generation_tokens",
        loggers,
    )
    stats = read_upstream("vllm/v1/metrics/stats.py")
    assert "self.computed += prefill_stats.num_computed_tokens" in stats
    scheduler = read_upstream("vllm/v1/core/sched/scheduler.py").splitlines()
    assert "prefill_stats=request.take_prefill_stats()," in scheduler[1747]
    assert "num_accepted = max(len(generated_token_ids) - num_sampled, 0)" in scheduler[1594]


def test_a_client_abort_never_reaches_request_success() -> None:
    """The bench counts client aborts itself: AsyncLLM.abort drops the request in the output processor, whose
    only path to the finished-request stats (and so to vllm:request_success) is process_outputs."""
    tree = ast.parse(read_upstream("vllm/v1/engine/output_processor.py"))
    methods = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    callers = sorted(
        name
        for name, fn in methods.items()
        for call in ast.walk(fn)
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "self._update_stats_from_finished"
    )
    assert callers == ["process_outputs"]
    abort = ast.unparse(methods["abort_requests"])
    assert "self.request_states.pop(request_id, None)" in abort
    assert "finish_reason=FinishReason.ABORT" in abort  # the client's own final output, nothing recorded
    process = ast.get_source_segment(read_upstream("vllm/v1/engine/output_processor.py"), methods["process_outputs"])
    assert process is not None
    assert "# Ignore output for already-aborted request." in process  # the engine core's later outputs
    llm = read_upstream("vllm/v1/engine/async_llm.py")
    assert "await self.abort(q.request_id, internal=True)" in llm
    assert "self.output_processor.abort_requests(request_ids, internal)" in llm
    loggers = read_upstream("vllm/v1/metrics/loggers.py")
    assert "for finished_request in iteration_stats.finished_requests:" in loggers
