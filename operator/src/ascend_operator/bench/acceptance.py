"""The seed's acceptance criteria for its mixed workload, judged against the same engine's own baselines (pure).

Why this module exists: docs/FACTS.md "Target workload" asks of the service, with 1 x ~300K beside 31 short
requests, that short requests are not starved, the long one keeps progressing and decodes at >= 50 tok/s,
with no preemption and a known KV peak; issue 39 turns that into figures: the short requests' TTFT p99
within 3x their idle TTFT, the long request's decode >= 50 tok/s and its completion within 15% of its time
alone, no preemption, KV peak stated. "Idle" and "alone" are measured, not assumed: `aisctl bench mixed
--baseline` runs the long request alone and the short workers alone (same prompts' shapes, same engine,
same session) before the mix, and this module compares. The short workers alone are the idle reference
because 31 workers that start together queue behind each other's prefill on any engine (31 x 1K prompts
are ~6 s of TP8 prefill): what the long request adds is the question, not what the shorts cost each other.
The criteria are reported, not judged into the verdict: the verdict is the benchmark's own validity (the
seed's four rules), and a run that measured correctly a service that misses a target is still a result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SHORT_TTFT_FACTOR = 3.0  # short TTFT p99 within 3x their idle TTFT
LONG_DECODE_TOK_S = 50.0  # docs/FACTS.md: single-user decode >= 50 tok/s
LONG_COMPLETION_FACTOR = 1.15  # the long request's completion within 15% of its time alone
TIMELINE_POINTS = 240  # about this many of the long request's chunk arrivals are kept for the plot


def _ratio(value: float | None, reference: float | None) -> float | None:
    return None if value is None or not reference else round(value / reference, 3)


def criteria(
    mix: Mapping[str, Any], *, idle: Mapping[str, Any] | None, alone: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Each criterion's measured value, its limit and whether it holds (None when no baseline was run)."""
    idle_p99 = None if idle is None else idle.get("short_ttft_p99_s")
    alone_latency = None if alone is None else alone.get("long_latency_s")
    ttft_ratio = _ratio(mix.get("short_ttft_p99_s"), idle_p99)
    completion_ratio = _ratio(mix.get("long_latency_s"), alone_latency)
    decode = mix.get("long_decode_tok_s")
    preemptions = mix.get("preemptions")
    out: dict[str, Any] = {
        "short_ttft_idle_p50_s": None if idle is None else idle.get("short_ttft_p50_s"),
        "short_ttft_idle_p99_s": idle_p99,
        "short_ttft_p99_vs_idle": ttft_ratio,
        "short_ttft_ok": None if ttft_ratio is None else ttft_ratio <= SHORT_TTFT_FACTOR,
        "long_alone_latency_s": alone_latency,
        "long_alone_decode_tok_s": None if alone is None else alone.get("long_decode_tok_s"),
        "long_completion_vs_alone": completion_ratio,
        "long_completion_ok": None if completion_ratio is None else completion_ratio <= LONG_COMPLETION_FACTOR,
        "long_decode_ok": None if decode is None else decode >= LONG_DECODE_TOK_S,
        "no_preemption_ok": None if preemptions is None else preemptions == 0,
        "kv_peak": mix.get("kv_peak"),
    }
    judged = [out[k] for k in ("short_ttft_ok", "long_completion_ok", "long_decode_ok", "no_preemption_ok")]
    out["all_met"] = None if None in judged else all(judged)
    return out


def timeline(records: Sequence[Any], *, t0: float, scale: float) -> dict[str, Any]:
    """Engine seconds from the point's start: when each short request went out and its TTFT, and the long
    request's send, first token and chunk arrivals (its progress), for bench/plot.py's timeline."""

    def at(t: float) -> float:
        return round((t - t0) * scale, 3)

    shorts = [
        [at(r.sent_at), round(r.ttft_s * scale, 3)]
        for r in records
        if r.kind == "short" and r.ok and r.sent_at is not None and r.ttft_s is not None
    ]
    long = next((r for r in records if r.kind == "long"), None)
    if long is None or long.sent_at is None:
        return {"shorts": sorted(shorts), "long": None}
    chunks = [at(t) for t in long.chunk_times]
    progress = [[t, round((i + 1) / len(chunks), 4)] for i, t in enumerate(chunks)]
    kept = progress[:: max(1, len(progress) // TIMELINE_POINTS)]
    if progress and kept[-1] is not progress[-1]:
        kept.append(progress[-1])
    return {
        "shorts": sorted(shorts),
        "long": {
            "sent_s": at(long.sent_at),
            "first_token_s": chunks[0] if chunks else None,
            "end_s": at(long.sent_at + long.latency_s) if long.ok else None,
            "chunks": len(chunks),
            "progress": kept,  # (engine second, fraction of the output's chunks received by then)
        },
    }


def lines(label: str, summary: Mapping[str, Any]) -> list[str]:
    """Markdown lines: the mixed point's figures against each criterion (result.md of `aisctl bench mixed`)."""
    c = summary.get("criteria") or {}

    def mark(ok: bool | None) -> str:
        return "-" if ok is None else ("met" if ok else "MISSED")

    return [
        f"Seed criteria for {label} (references measured with --baseline):",
        f"- short TTFT p50 / p99 {summary.get('short_ttft_p50_s')} / {summary.get('short_ttft_p99_s')} s, shorts "
        f"alone {c.get('short_ttft_idle_p50_s')} / {c.get('short_ttft_idle_p99_s')} s: "
        f"{c.get('short_ttft_p99_vs_idle')}x (<= {SHORT_TTFT_FACTOR:g}x) {mark(c.get('short_ttft_ok'))}",
        f"- long decode {summary.get('long_decode_tok_s')} tok/s (alone {c.get('long_alone_decode_tok_s')}; "
        f">= {LONG_DECODE_TOK_S:g}) {mark(c.get('long_decode_ok'))}",
        f"- long completion {summary.get('long_latency_s')} s, alone {c.get('long_alone_latency_s')} s: "
        f"{c.get('long_completion_vs_alone')}x (<= {LONG_COMPLETION_FACTOR:g}x) {mark(c.get('long_completion_ok'))}",
        f"- preemptions {summary.get('preemptions')} {mark(c.get('no_preemption_ok'))}; KV peak {c.get('kv_peak')}",
    ]
