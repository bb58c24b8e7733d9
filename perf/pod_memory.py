"""`python -m perf.pod_memory [--hours 1] [--ranks 1,8]`: what the health loop keeps per engine pod.

Why: one operator watches a whole fleet, so the memory it holds per pod, and the CPU a scrape costs,
decide how far it scales (issue 14). This folds `--hours` of scrapes, every 5 s at the default interval,
of the simulator's own /metrics exposition (aissim.metrics.VllmMetrics: vLLM V1's series, an engine busy
with 16 requests, speculative decoding on) into one pod's health state, as the health loop does, and
reports with tracemalloc the bytes that state retains, side by side for the two retention rules:

- by time (now): the samples of the last four stall windows, plus the first sample of a frozen span
  (health/judge.py `keep`);
- by count (before): the last 240 samples, whatever their age.

It also reports the median CPU time of parsing one scrape (prometheus-client's text parser, the health
loop's main per-pod CPU cost), side by side: the whole exposition (before) and only the families the
detectors read (health/samples.py `relevant`, now). No cluster, no network.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from unittest import mock

from aissim.metrics import FinishedRequest, IterationRecord, VllmMetrics, cache_config_info
from ascend_operator.api.health import HealthSpec
from ascend_operator.health import judge
from ascend_operator.health.judge import PodHealth, fold_sample
from ascend_operator.health.samples import families, parse_metrics, sample_of

SCRAPE_SECONDS = 5.0


def expositions(ranks: int) -> Iterator[bytes]:
    """An engine's /metrics after each further 5 s of steady decode on every DP rank."""
    info = cache_config_info(
        block_size=128, gpu_memory_utilization=0.9, enable_prefix_caching=True, num_gpu_blocks=9000
    )
    reg = VllmMetrics(
        model_name="deepseek-v4-flash",
        num_engines=ranks,
        max_model_len=131072,
        num_spec_tokens=3,
        cache_config_info=info,
    )
    done = FinishedRequest("length", 60.0, 3000, 1000, 1000, 0.1, 1.0, 59.0, 58.0, 0.058)
    while True:
        for engine in range(ranks):
            reg.set_scheduler_state(engine=engine, running=16, waiting=0, kv_usage=0.3, queries=4096, hits=2048)
            for _ in range(80):  # ~57 ms steps: 5 s of decode
                it = IterationRecord(
                    num_generation_tokens=16, inter_token_latencies=[0.057] * 16, num_drafts=16,
                    num_draft_tokens=48, num_accepted_tokens=30, accepted_per_pos=[14, 10, 6],
                )  # fmt: skip
                reg.record_iteration(engine=engine, it=it)
            reg.record_iteration(engine=engine, it=IterationRecord(finished=[done], time_to_first_tokens=[0.4]))
        yield reg.exposition()


def parse_cpu(ranks: int, scrapes: int = 50) -> tuple[float, float]:
    """Median CPU seconds to parse one scrape: (the whole text, the families read), outside tracemalloc."""
    texts = [next(t).decode() for t in [expositions(ranks)] for _ in range(scrapes)]
    whole, filtered = [], []
    for text in texts:
        start = time.process_time()
        sample_of(families(text), t=0.0)
        whole.append(time.process_time() - start)
        start = time.process_time()
        parse_metrics(text, t=0.0)
        filtered.append(time.process_time() - start)
    return statistics.median(whole), statistics.median(filtered)


def retained(ranks: int, scrapes: int, *, by_time: bool) -> tuple[int, int]:
    """(bytes the pod's state retains, samples kept) after `scrapes` scrapes, parsed as the health loop does."""
    cfg = HealthSpec()
    texts = expositions(ranks)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    windows = judge.KEEP_STALL_WINDOWS if by_time else 1e9  # 1e9 windows: only the 240-sample cap bounds
    with mock.patch.object(judge, "KEEP_STALL_WINDOWS", windows):
        state = replace(PodHealth(mismatches=()), ready_since=0.0, served=True)  # drift learns, as when Ready
        for i in range(scrapes):
            state = fold_sample(state, parse_metrics(next(texts).decode(), t=i * SCRAPE_SECONDS), cfg=cfg)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return held, len(state.samples)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perf.pod_memory", description=__doc__.split("\n\n")[0])
    p.add_argument("--hours", type=float, default=0.5, help="hours of 5 s scrapes folded in")
    p.add_argument("--ranks", default="1,8", help="DP ranks per engine (each has its own series), comma-separated")
    args = p.parse_args(argv)
    scrapes = int(args.hours * 3600 / SCRAPE_SECONDS)
    print(f"{scrapes} scrapes ({args.hours:g} h at {SCRAPE_SECONDS:g} s) folded into one pod's health state\n")
    print("| DP ranks | samples kept by | samples kept | KB retained per pod |")
    print("|---|---|---|---|")
    cpu = {}
    for ranks in (int(r) for r in args.ranks.split(",")):
        rows = {
            rule: retained(ranks, scrapes, by_time=rule == "time (now)") for rule in ("count (before)", "time (now)")
        }
        for rule, (held, kept) in rows.items():
            print(f"| {ranks} | {rule} | {kept} | {held / 1024:.0f} |")
        print(f"| {ranks} | | ratio | {rows['count (before)'][0] / max(rows['time (now)'][0], 1):.1f}x less |")
        cpu[ranks] = parse_cpu(ranks)
    print("\n| DP ranks | parse CPU, whole text (before) | parse CPU, families read (now) | ratio |")
    print("|---|---|---|---|")
    for ranks, (whole, filtered) in cpu.items():
        print(f"| {ranks} | {whole * 1000:.1f} ms | {filtered * 1000:.1f} ms | {whole / filtered:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
