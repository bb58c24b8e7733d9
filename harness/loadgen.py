"""Closed-loop load generator that measures a simulator the way the seed measured the real engine (part of the
harness: the simulator tests and perf/sim_sweep.py use it; the simulator itself never generates load).

Why this module exists: the seed's rules for a harness (docs/FACTS.md "Benchmark pitfalls") are fixed output
(`ignore_eos` + fixed `max_tokens`), a fresh prompt per request so the prefix cache cannot flatter TTFT,
and the engine's own metrics rather than client-side stream timing. The sweep test and
perf/sim_sweep.py both use this: C workers each send requests back to back; output tok/s is the delta of
each engine's `vllm:generation_tokens` delta over its busy engine seconds (/sim/state), TPOT and TTFT the deltas of
`vllm:request_time_per_output_token_seconds` and `vllm:time_to_first_token_seconds`. Wall time x scale is
reported beside it (it can only be larger: a starved host slows engine time, never speeds it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class SweepPoint:
    concurrency: int
    requests: int
    output_tok_s: float
    mean_tpot_s: float
    mean_ttft_s: float
    engine_seconds: float
    wall_seconds: float


def scrape_totals(text: str) -> dict[str, float]:
    """Each sample name summed over all label sets, and also per engine as `name|engine`."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
            engine = sample.labels.get("engine")
            if engine is not None:
                key = f"{sample.name}|{engine}"
                out[key] = out.get(key, 0.0) + sample.value
    return out


async def _get_json(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as resp:
        resp.raise_for_status()
        return await resp.json()


async def _metrics(session: aiohttp.ClientSession, base: str) -> dict[str, float]:
    async with session.get(base + "/metrics") as resp:
        resp.raise_for_status()
        return scrape_totals(await resp.text())


async def complete(
    session: aiohttp.ClientSession,
    base: str,
    *,
    model: str,
    prompt_tokens: int,
    max_tokens: int,
    text: str | None = None,
) -> dict[str, Any]:
    """One non-streaming completion with a fresh (or given) prompt of `prompt_tokens` tokens."""
    body = {
        "model": model,
        "prompt": text if text is not None else f"fresh prompt {uuid.uuid4()}",
        "sim_prompt_tokens": prompt_tokens,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0,
    }
    async with session.post(base + "/v1/completions", json=body) as resp:
        data: dict[str, Any] = await resp.json()
        if resp.status != 200:
            raise RuntimeError(f"completion failed: {resp.status} {data}")
        return data


async def run_point(
    base: str,
    *,
    model: str,
    concurrency: int,
    requests_per_worker: int,
    prompt_tokens: int,
    output_tokens: int,
) -> SweepPoint:
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        before = await _metrics(session, base)
        state0 = await _get_json(session, base + "/sim/state")
        wall0 = time.monotonic()

        async def worker() -> None:
            for _ in range(requests_per_worker):
                await complete(session, base, model=model, prompt_tokens=prompt_tokens, max_tokens=output_tokens)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.monotonic() - wall0
        after = await _metrics(session, base)
        state1 = await _get_json(session, base + "/sim/state")
    start = float(state0["engine_time_s"])
    end = max(float(e["last_step_end_engine_s"]) for e in state1["engines"])

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    # Output throughput per engine = its new tokens / its busy engine seconds, summed over DP engines.
    # Busy time, not the wall span: the client's turnaround between requests is idle engine time that
    # the time scale would magnify (1 ms of HTTP at scale 200 is 0.2 engine seconds).
    tok_s = 0.0
    for e0, e1 in zip(state0["engines"], state1["engines"], strict=True):
        busy = float(e1["busy_engine_s"]) - float(e0["busy_engine_s"])
        label = f"vllm:generation_tokens_total|{e1['engine']}"
        tokens = after.get(label, 0.0) - before.get(label, 0.0)
        tok_s += tokens / busy if busy > 0 else 0.0
    count = max(delta("vllm:request_time_per_output_token_seconds_count"), 1.0)
    return SweepPoint(
        concurrency=concurrency,
        requests=int(delta("vllm:e2e_request_latency_seconds_count")),
        output_tok_s=tok_s,
        mean_tpot_s=delta("vllm:request_time_per_output_token_seconds_sum") / count,
        mean_ttft_s=delta("vllm:time_to_first_token_seconds_sum")
        / max(delta("vllm:time_to_first_token_seconds_count"), 1.0),
        engine_seconds=max(end - start, 0.0),
        wall_seconds=wall,
    )
