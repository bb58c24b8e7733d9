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


def _timelines(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(title, summary) of every mixed point with a timeline: `mixed`, or the first round of each side of
    `mixed-ab` (every round's timeline stays in result.json)."""
    out = [(label, s) for label, s in (doc.get("mixed") or {}).items() if s.get("timeline")]
    seen: set[str] = set()
    for s in (doc.get("mixed_ab") or {}).get("rounds", []):
        if s.get("timeline") and s["endpoint"] not in seen:
            seen.add(s["endpoint"])
            out.append((f"{s['endpoint']} (round {s['round']})", s))
    return out


def write_timeline(doc: Mapping[str, Any], path: Path) -> bool:
    """The mixed workload over time, one panel per endpoint: each short request's TTFT at the moment it was
    sent (dots) against the long request's progress (its prefill span shaded, then the share of its output
    received), with the short requests' alone p99 x 3 as the criterion line. False when nothing to draw."""
    panels = _timelines(doc)
    if not panels:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), squeeze=False)
    for ax, (title, s) in zip(axes[:, 0], panels, strict=True):
        tl = s["timeline"]
        shorts = tl["shorts"]
        ax.scatter([x for x, _ in shorts], [y for _, y in shorts], s=10, color="tab:blue", label="short TTFT (s)")
        idle = (s.get("criteria") or {}).get("short_ttft_idle_p99_s")
        if idle:
            ax.axhline(3 * idle, color="tab:blue", linestyle=":", linewidth=1, label="3 x shorts-alone p99")
        ax.set_ylabel("short TTFT (s)")
        ax.set_xlabel("engine seconds since the point started")
        ax.grid(True, alpha=0.3)
        progress_axis = ax.twinx()
        long = tl.get("long")
        if long:
            first = long.get("first_token_s")
            if first is not None:
                ax.axvspan(long["sent_s"], first, color="tab:orange", alpha=0.12, label="long request prefilling")
            pts = long.get("progress") or []
            progress_axis.plot(
                [t for t, _ in pts], [f * 100 for _, f in pts], color="tab:orange", label="long output %"
            )
        progress_axis.set_ylim(0, 105)
        progress_axis.set_ylabel("long request's output received (%)")
        decode = s.get("long_decode_tok_s")
        ax.set_title(
            f"{title}: short TTFT p99 {s.get('short_ttft_p99_s')} s, long decode {decode} tok/s, "
            f"long request {s.get('long_latency_s')} s from send to last token",
            fontsize=9,
        )
        handles = ax.get_legend_handles_labels()
        more = progress_axis.get_legend_handles_labels()
        ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="upper right")
    fig.suptitle("1 x long beside short requests: short TTFT against the long request's progress")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
