"""The four scenarios: concurrency sweep, clean-prefill scan, mixed long + short, and A/B of two endpoints.

Why this module exists: each scenario is the seed's own protocol (docs/FACTS.md "Throughput and latency",
"Clean C1 prefill", the acceptance workload, "Benchmark pitfalls" 4) turned into a list of planned
requests and measured points; the figures and checks of each point come from rules.summarize, and the
verdict from report.finalize. Prompt keys name the seed, the scenario, the point and the request, so every
request of a run is fresh and a rerun with the same `--seed` is not (and is flagged).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ascend_operator.bench import acceptance
from ascend_operator.bench.compare import mixed_ab_summary
from ascend_operator.bench.prompts import prompt_key
from ascend_operator.bench.rules import Thresholds, summarize
from ascend_operator.bench.runner import Plan, ProgressFactory, Target, calibrate, run_point

LONG_DECODE_TARGET_TOK_S = 50.0  # docs/FACTS.md target workload: single-user decode >= 50 tok/s
STALL_GAP_S = 30.0  # engine seconds without a token from the long request = not progressing


@dataclass(frozen=True)
class Common:
    seed: int
    thresholds: Thresholds
    progress: ProgressFactory | None


def sweep_plans(seed: int, tag: str, concurrency: int, rounds: int, inp: int, out: int) -> list[Plan]:
    return [Plan(prompt_key(seed, tag, concurrency, i), inp, out) for i in range(concurrency * rounds)]


async def sweep(
    target: Target, common: Common, *, concurrencies: Sequence[int], inp: int, out: int, rounds: int
) -> list[dict[str, Any]]:
    await calibrate(target, seed=common.seed, tokens=inp)
    points = []
    for c in concurrencies:
        plans = sweep_plans(common.seed, f"sweep-{target.endpoint.label}", c, rounds, inp, out)
        batch = await run_point(target, plans, concurrency=c, label=f"C{c}", context=inp, progress=common.progress)
        points.append(summarize(batch, common.thresholds))
    return points


async def prefill(
    target: Target, common: Common, *, contexts: Sequence[int], out: int, rounds: int
) -> list[dict[str, Any]]:
    """Concurrency 1, a distinct seed per context length and a fresh prompt per round, short output."""
    await calibrate(target, seed=common.seed, tokens=min(contexts))
    points = []
    for ctx in contexts:
        plans = [
            Plan(prompt_key(common.seed, "prefill", target.endpoint.label, ctx, r), ctx, out) for r in range(rounds)
        ]
        label = f"{ctx // 1024}K" if ctx % 1024 == 0 else str(ctx)
        batch = await run_point(target, plans, concurrency=1, label=label, context=ctx, progress=common.progress)
        points.append(summarize(batch, common.thresholds))
    return points


@dataclass(frozen=True)
class Mix:
    """The mixed workload: 1 x long beside `short` closed-loop workers, `short_rounds` requests each."""

    long_context: int
    long_output: int
    short: int
    short_rounds: int
    short_input: int
    short_output: int


async def mixed(
    target: Target,
    common: Common,
    mix: Mix,
    *,
    tag: str = "mixed",
    long_target: Target | None = None,
    baseline: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """1 x long beside `short` closed-loop short workers ("32 concurrent + 300K" = 1 x 300K + 31 short);
    `tag` keeps each run's prompts its own (a repeated run must not hit the prefix cache). `long_target`
    sends the long request to an engine of its own (length-aware routing: the target's endpoint must scrape
    both engines); `baseline` first runs the long request alone and the short workers alone, the references
    of bench/acceptance.py's criteria."""
    await calibrate(target, seed=common.seed, tokens=mix.short_input)
    label = target.endpoint.label
    long_plan = Plan(prompt_key(common.seed, tag, label, "long"), mix.long_context, mix.long_output, kind="long")
    plans = [long_plan]
    plans += [
        Plan(prompt_key(common.seed, tag, label, "short", i), mix.short_input, mix.short_output)
        for i in range(mix.short * mix.short_rounds)
    ]
    points: list[dict[str, Any]] = []
    alone: dict[str, Any] | None = None
    idle: dict[str, Any] | None = None
    if long_target is not None:
        long_target.chars_per_token = target.chars_per_token  # one model, one tokenizer
    if baseline:
        lt = long_target or target
        solo = Plan(prompt_key(common.seed, tag, label, "long-alone"), mix.long_context, mix.long_output, kind="long")
        batch = await run_point(
            lt, [solo], concurrency=1, label="long alone", context=mix.long_context, progress=common.progress
        )
        points.append(summarize(batch, common.thresholds))
        alone = _mix_figures(batch.records, scale=batch.clock.scale, point=points[-1])
        quiet = [
            Plan(prompt_key(common.seed, tag, label, "short-alone", i), mix.short_input, mix.short_output)
            for i in range(mix.short * mix.short_rounds)
        ]
        batch = await run_point(
            target,
            quiet,
            concurrency=mix.short,
            label="shorts alone",
            context=mix.short_input,
            progress=common.progress,
        )
        points.append(summarize(batch, common.thresholds))
        idle = _mix_figures(batch.records, scale=batch.clock.scale, point=points[-1])
    batch = await run_point(
        target,
        plans,
        concurrency=mix.short + 1,
        label=f"1x{mix.long_context // 1024}K+{mix.short}",
        context=mix.long_context,
        progress=common.progress,
        routes=None if long_target is None else {"long": long_target.endpoint},
    )
    point = summarize(batch, common.thresholds)
    points.append(point)
    summary = mixed_summary(batch.records, scale=batch.clock.scale, point=point)
    summary["criteria"] = acceptance.criteria(summary, idle=idle, alone=alone)
    summary["timeline"] = acceptance.timeline(batch.records, t0=batch.started_at, scale=batch.clock.scale)
    return points, summary


def _mix_figures(records: Sequence[Any], *, scale: float, point: dict[str, Any]) -> dict[str, Any]:
    """A baseline point's figures in mixed_summary's keys (the long request alone, or the shorts alone)."""
    if any(r.kind == "long" for r in records):
        return mixed_summary(records, scale=scale, point=point)
    shorts = sorted(r.ttft_s * scale for r in records if r.ok and r.ttft_s is not None)
    return {
        "short_ttft_p50_s": round(shorts[len(shorts) // 2], 3) if shorts else None,
        "short_ttft_p99_s": _p(shorts, 0.99),
    }


def _p(ordered: Sequence[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)


def mixed_summary(records: Sequence[Any], *, scale: float, point: dict[str, Any]) -> dict[str, Any]:
    """The acceptance questions: does the long request keep progressing, its decode tok/s against the
    seed's >= 50 tok/s, the short requests' TTFT tail, KV peak and preemptions."""
    long = next(r for r in records if r.kind == "long")
    shorts = [r.ttft_s * scale for r in records if r.kind == "short" and r.ok and r.ttft_s is not None]
    decode = (
        (long.completion_tokens - 1) / (long.decode_s * scale)
        if long.ok and long.decode_s and long.completion_tokens > 1
        else None
    )
    gap = long.max_gap_s * scale
    shorts.sort()
    return {
        "long_ok": long.ok,
        "long_prompt_tokens": long.prompt_tokens,
        "long_completion_tokens": long.completion_tokens,
        "long_ttft_s": None if long.ttft_s is None else round(long.ttft_s * scale, 3),
        "long_latency_s": round(long.latency_s * scale, 3) if long.ok else None,
        "long_max_gap_s": round(gap, 3),
        "long_progressing": long.ok and gap < STALL_GAP_S,
        "long_decode_tok_s": None if decode is None else round(decode, 2),
        "long_decode_target_tok_s": LONG_DECODE_TARGET_TOK_S,
        "long_decode_target_met": decode is not None and decode >= LONG_DECODE_TARGET_TOK_S,
        "short_ttft_p50_s": round(shorts[len(shorts) // 2], 3) if shorts else None,
        "short_ttft_p99_s": _p(shorts, 0.99),
        "short_ttft_max_s": round(shorts[-1], 3) if shorts else None,
        "output_tok_s": point["output_tok_s"],
        "kv_peak": point["engine"]["kv_peak"],
        "preemptions": point["engine"]["preemptions"],
    }


async def ab(
    a: Target, b: Target, common: Common, *, concurrency: int, inp: int, out: int, rounds: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One harness, one session, interleaved rounds (A B, B A, A B, ...) so drift hits both sides alike."""
    for target in (a, b):
        await calibrate(target, seed=common.seed, tokens=inp)
    points = []
    for r in range(rounds):
        order = (a, b) if r % 2 == 0 else (b, a)
        for target in order:
            tag = f"ab-{target.endpoint.label}-r{r}"
            plans = sweep_plans(common.seed, tag, concurrency, 1, inp, out)
            batch = await run_point(
                target,
                plans,
                concurrency=concurrency,
                label=f"r{r} C{concurrency}",
                context=inp,
                progress=common.progress,
            )
            points.append(summarize(batch, common.thresholds))
    return points, ab_summary(points, a.endpoint.label, b.endpoint.label)


def _side(points: Sequence[dict[str, Any]], label: str) -> dict[str, Any]:
    mine = [p for p in points if p["endpoint"] == label]

    def stats(values: list[float]) -> dict[str, float | None]:
        if not values:
            return {"mean": None, "stdev_pct": None}
        mean = statistics.fmean(values)
        spread = statistics.stdev(values) / mean * 100 if len(values) > 1 and mean else 0.0
        return {"mean": round(mean, 4), "stdev_pct": round(spread, 2)}

    return {
        "rounds": len(mine),
        "output_tok_s": stats([p["output_tok_s"] for p in mine if p["output_tok_s"] is not None]),
        "ttft_mean_s": stats([p["engine"]["ttft_mean_s"] for p in mine if p["engine"]["ttft_mean_s"] is not None]),
        "tpot_mean_s": stats([p["engine"]["tpot_mean_s"] for p in mine if p["engine"]["tpot_mean_s"] is not None]),
    }


def ab_summary(points: Sequence[dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Per side mean and spread; B against A in percent (positive = B larger)."""
    sides = {a: _side(points, a), b: _side(points, b)}
    diff: dict[str, float | None] = {}
    for key in ("output_tok_s", "ttft_mean_s", "tpot_mean_s"):
        ma, mb = sides[a][key]["mean"], sides[b][key]["mean"]
        diff[key] = round((mb - ma) / ma * 100, 2) if ma and mb is not None else None
    return {"a": a, "b": b, "sides": sides, "b_vs_a_pct": diff}


async def mixed_ab(
    a: Target,
    b: Target,
    common: Common,
    mix: Mix,
    *,
    rounds: int,
    long_targets: Mapping[str, Target] | None = None,
    baseline: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The mixed workload on two endpoints in one session, rounds interleaved (A B, B A, ...) so drift hits
    both alike; each round's prompts are its own. The comparison is bench/compare.py's."""
    points: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    for r in range(rounds):
        for target in (a, b) if r % 2 == 0 else (b, a):
            long_target = (long_targets or {}).get(target.endpoint.label)
            got, summary = await mixed(
                target, common, mix, tag=f"mixed-ab-r{r}", long_target=long_target, baseline=baseline
            )
            points += got
            summaries.append({**summary, "endpoint": target.endpoint.label, "round": r})
    clock = a.clock.kind if a.clock.kind == b.clock.kind else f"{a.clock.kind}/{b.clock.kind}"
    return points, mixed_ab_summary(summaries, a.endpoint.label, b.endpoint.label, clock=clock)
