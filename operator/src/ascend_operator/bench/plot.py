"""A PNG of a bench result: output tok/s and engine TTFT / TPOT against concurrency, context or round.

Why this module exists: a table hides the knee the seed found (C32 -> C64 adds no throughput while TTFT
jumps); a plot shows it. matplotlib with the Agg backend (no display), from the optional `bench` extra.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _x(doc: Mapping[str, Any], point: Mapping[str, Any], i: int) -> float:
    if doc["scenario"] == "prefill":
        return float(point["context"]) / 1024
    if doc["scenario"] == "sweep":
        return float(point["concurrency"])
    return float(i)


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    xlabel = {"prefill": "context (K tokens)", "sweep": "concurrency"}.get(doc["scenario"], "point")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    by_endpoint: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    for i, point in enumerate(doc["points"]):
        by_endpoint.setdefault(point["endpoint"], []).append(
            (_x(doc, point, i // max(len(doc["endpoints"]), 1)), point)
        )
    tpot_axis = ax2.twinx()
    for endpoint, rows in by_endpoint.items():
        xs = [x for x, _ in rows]
        ax1.plot(xs, [p["output_tok_s"] or 0.0 for _, p in rows], marker="o", label=endpoint)
        ax2.plot(xs, [p["engine"]["ttft_mean_s"] or 0.0 for _, p in rows], marker="o", label=f"{endpoint} TTFT")
        tpot_axis.plot(
            xs,
            [(p["engine"]["tpot_mean_s"] or 0.0) * 1000 for _, p in rows],
            marker="s",
            linestyle="--",
            label=f"{endpoint} TPOT",
        )
    ax1.set(xlabel=xlabel, ylabel="output tok/s", title="throughput (engine tokens)")
    ax2.set(xlabel=xlabel, ylabel="mean TTFT (s, solid)", title="TTFT and TPOT (engine histograms)")
    tpot_axis.set_ylabel("mean TPOT (ms, dashed)")
    if doc["scenario"] == "sweep":
        for ax in (ax1, ax2):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({x for rows in by_endpoint.values() for x, _ in rows}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    lines = ax2.get_legend_handles_labels()
    more = tpot_axis.get_legend_handles_labels()
    ax2.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="upper left")
    fig.suptitle(f"aisctl bench {doc['scenario']}: {doc.get('verdict', '?')} (seed {doc['seed']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
