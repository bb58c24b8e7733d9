"""The scrape filter (health/samples.py `relevant`): dropping the families the detectors never read must
not change a single figure they do read, on the exposition prometheus-client really writes (counters'
HELP/TYPE lines carry `_total`, as vLLM's do)."""

import pytest

from aissim.metrics import FinishedRequest, IterationRecord, VllmMetrics, cache_config_info
from ascend_operator.health.samples import families, parse_metrics, relevant, sample_of


def exposition(ranks: int) -> str:
    info = cache_config_info(block_size=128, gpu_memory_utilization=0.9, enable_prefix_caching=True, num_gpu_blocks=90)
    reg = VllmMetrics(model_name="m", num_engines=ranks, max_model_len=8192, num_spec_tokens=3, cache_config_info=info)
    done = FinishedRequest("length", 6.0, 300, 100, 100, 0.1, 0.5, 5.5, 5.0, 0.05)
    for engine in range(ranks):
        reg.set_scheduler_state(engine=engine, running=4 + engine, waiting=engine, kv_usage=0.2, queries=64, hits=32)
        for step in range(10 + engine):
            reg.record_iteration(
                engine=engine,
                it=IterationRecord(
                    num_prompt_tokens=16 if step == 0 else 0, num_generation_tokens=4, num_preempted_reqs=step % 3 == 0,
                    time_to_first_tokens=[0.3] if step == 0 else [], inter_token_latencies=[0.05] * 4,
                    finished=[done] if step == 5 else [], num_drafts=4, num_draft_tokens=12, num_accepted_tokens=7,
                    accepted_per_pos=[4, 2, 1],
                ),
            )  # fmt: skip
    return reg.exposition().decode()


@pytest.mark.parametrize("ranks", [1, 4])
def test_the_filtered_scrape_reads_exactly_what_the_whole_one_does(ranks: int) -> None:
    text = exposition(ranks)
    whole = sample_of(families(text), t=1.0)
    assert parse_metrics(text, t=1.0) == whole
    assert whole.generation_tokens == sum(4 * (10 + e) for e in range(ranks))
    for figure in (whole.spec_accepted_per_pos, whole.ttft, whole.tpot, whole.cache_config, whole.preemptions):
        assert figure  # each family is in the exposition, so a filter that drops one shows here
    assert len(whole.ranks) == ranks
    assert len(relevant(text)) < len(text) / 2  # and most of the text never reaches the parser
