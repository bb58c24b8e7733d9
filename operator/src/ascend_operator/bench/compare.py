"""Two endpoints under the seed's mixed workload, side by side: the figures, the table and the plot (pure but
for the PNG).

Why this module exists: whether prefill/decode disaggregation pays for the seed's mix (one ~256-300K prompt
beside 31 short requests at C32) is a comparison of two deployments of the same engines: the short
requests' TTFT (does the long prefill still stall them?), the long request's completion time (what the
split costs it), and output tokens per second. Each figure is the median over the interleaved rounds of
`aisctl bench mixed-ab`, and the table says which clock measured it: on the simulator they are the
simulator's Ascend timings, not an NPU's.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: (summary key, label, unit, whether lower is better)
FIGURES = (
    ("short_ttft_p50_s", "short TTFT p50", "s", True),
    ("short_ttft_p99_s", "short TTFT p99", "s", True),
    ("long_latency_s", "long request completion", "s", True),
    ("long_ttft_s", "long request TTFT", "s", True),
    ("output_tok_s", "output tok/s", "", False),
    # With --baseline (bench/acceptance.py): the references and the seed's criteria.
    ("short_ttft_idle_p99_s", "short TTFT p99, shorts alone", "s", True),
    ("short_ttft_p99_vs_idle", "short TTFT p99 / alone (<= 3)", "x", True),
    ("long_alone_latency_s", "long request alone", "s", True),
    ("long_completion_vs_alone", "long completion / alone (<= 1.15)", "x", True),
    ("long_decode_tok_s", "long decode tok/s (>= 50)", "", False),
    ("kv_peak", "KV peak", "%", True),
    ("preemptions", "preemptions", "", True),
)


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def mixed_ab_summary(summaries: Sequence[Mapping[str, Any]], a: str, b: str, *, clock: str) -> dict[str, Any]:
    """Per side the median of each figure over its rounds; B against A in percent (positive = B larger)."""
    sides: dict[str, dict[str, Any]] = {}
    for label in (a, b):
        mine = [{**s, **(s.get("criteria") or {})} for s in summaries if s["endpoint"] == label]
        sides[label] = {key: _median([s.get(key) for s in mine]) for key, *_ in FIGURES}
        sides[label]["rounds"] = len(mine)
        sides[label]["long_ok"] = all(s.get("long_ok") for s in mine)
        sides[label]["criteria_met_rounds"] = sum(1 for s in mine if s.get("all_met"))
    diff: dict[str, float | None] = {}
    for key, *_ in FIGURES:
        va, vb = sides[a][key], sides[b][key]
        diff[key] = round((vb - va) / va * 100, 1) if va and vb is not None else None
    return {"a": a, "b": b, "clock": clock, "sides": sides, "b_vs_a_pct": diff, "rounds": list(summaries)}


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "%":
        return f"{value * 100:.1f}%"
    return f"{value:.1f}" if not unit else f"{value:.2f} {unit}"


def table(summary: Mapping[str, Any]) -> str:
    """A Markdown table, one row per figure, labelled with the clock that measured it."""
    a, b = summary["a"], summary["b"]
    simulated = "aissim" in summary["clock"]
    where = "simulator figures (aissim's Ascend timings, engine clock)" if simulated else "wall-clock figures"
    rounds = summary["sides"][a]["rounds"]
    lines = [
        f"Medians over {rounds} interleaved round(s) per side; {where}.",
        "",
        f"| figure | {a} | {b} | {b} vs {a} |",
        "|---|---|---|---|",
    ]
    for key, label, unit, _ in FIGURES:
        if summary["sides"][a].get(key) is None and summary["sides"][b].get(key) is None:
            continue  # a baseline figure of a run without --baseline
        pct = summary["b_vs_a_pct"][key]
        lines.append(
            f"| {label} | {_cell(summary['sides'][a][key], unit)} | {_cell(summary['sides'][b][key], unit)} | "
            f"{'-' if pct is None else f'{pct:+.1f}%'} |"
        )
    if any(s.get("criteria") for s in summary.get("rounds", [])):
        met = ", ".join(f"{side} {summary['sides'][side]['criteria_met_rounds']}/{rounds}" for side in (a, b))
        lines += ["", f"Rounds meeting all of the seed's criteria: {met}."]
    return "\n".join(lines) + "\n"


def write_plot(summary: Mapping[str, Any], path: Path, *, title: str) -> None:
    """Bars per figure, one colour per side: the short requests' TTFT, the long request's times, tok/s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = summary["a"], summary["b"]
    panels = (
        ("short requests' TTFT (s)", ("short_ttft_p50_s", "short_ttft_p99_s")),
        ("long request (s)", ("long_ttft_s", "long_latency_s")),
        ("output tok/s", ("output_tok_s",)),
    )
    labels = {key: label for key, label, *_ in FIGURES}
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for ax, (name, keys) in zip(axes, panels, strict=True):
        xs = range(len(keys))
        for offset, side in ((-0.2, a), (0.2, b)):
            values = [summary["sides"][side][k] or 0.0 for k in keys]
            ax.bar([x + offset for x in xs], values, width=0.4, label=side)
        ax.set_xticks(list(xs), [labels[k] for k in keys], fontsize=8)
        ax.set_title(name)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    simulated = "aissim" in summary["clock"]
    fig.suptitle(f"{title}{' (simulator figures)' if simulated else ''}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
