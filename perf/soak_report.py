"""The chaos soak's verdict from what it recorded: per fault kind, how many were injected, detected, rolled
and recovered and how long each took; rolls of pods no fault touched; requests lost outside the faulted
engines; and a timeline plot.

Why pure functions over the records: the two figures that must be 0 are judgements (was this pod faulted
when its request failed? was this deletion one the soak caused?), and a judgement is tested on records
(tests/perf/test_soak_report.py), not by running the soak.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perf.soak_faults import ALL_KINDS, CLUSTER_FAULTS, Fault
from perf.soak_watch import Picture, Request, RollSeen


@dataclass(frozen=True)
class KindRow:
    kind: str
    injected: int
    detected: int
    rolled: int
    recovered: int
    missed: int
    detect_s: tuple[float, ...]
    roll_s: tuple[float, ...]
    recover_s: tuple[float, ...]


def _spans(faults: Iterable[Fault], end: str) -> tuple[float, ...]:
    return tuple(round(t - f.injected, 1) for f in faults if (t := getattr(f, end)) is not None)


def rows(faults: Sequence[Fault]) -> list[KindRow]:
    out = []
    for kind in ALL_KINDS:
        mine = [f for f in faults if f.kind == kind]
        out.append(
            KindRow(
                kind=kind,
                injected=len(mine),
                detected=sum(f.detected is not None for f in mine),
                rolled=sum(f.rolled is not None for f in mine),
                recovered=sum(f.recovered is not None for f in mine),
                missed=sum(f.missed for f in mine),
                detect_s=_spans(mine, "detected"),
                roll_s=_spans(mine, "rolled"),
                recover_s=_spans(mine, "recovered"),
            )
        )
    return out


def faulted_since(faults: Sequence[Fault]) -> dict[str, float]:
    """uid -> when a fault first touched that pod."""
    out: dict[str, float] = {}
    for f in faults:
        if f.uid and f.kind not in CLUSTER_FAULTS:
            out[f.uid] = min(out.get(f.uid, f.injected), f.injected)
    return out


def false_rolls(rolls: Iterable[RollSeen], faults: Sequence[Fault]) -> list[RollSeen]:
    """Roll records of pods no fault touched (must be none)."""
    touched = faulted_since(faults)
    return [r for r in rolls if r.uid not in touched]


def vanished_unrolled(pic: Picture, faults: Sequence[Fault], *, end: float) -> list[str]:
    """Pods that went (or are going) before `end` with no roll record and no fault: deleted behind the
    operator's own books (must be none)."""
    touched = faulted_since(faults)
    return sorted(
        f"{p.service}/{p.name}"
        for p in pic.pods.values()
        if (p.gone_at is not None or p.deleting) and p.uid not in touched and p.uid not in pic.rolls
    )


def lost_outside(requests: Iterable[Request], faults: Sequence[Fault]) -> list[Request]:
    """Failed requests whose pod no fault had touched by the time they ended (must be none): a request the
    faulted engine fails, before or after the operator takes it out, is the fault's cost, not a loss."""
    touched = faulted_since(faults)
    return [r for r in requests if not r.ok and not (r.uid in touched and touched[r.uid] <= r.end)]


def _fmt(spans: tuple[float, ...]) -> str:
    if not spans:
        return "-"
    if len(spans) == 1:
        return f"{spans[0]:.1f}"
    return f"{statistics.median(spans):.1f} ({min(spans):.1f}-{max(spans):.1f})"


def table(faults: Sequence[Fault], skipped: dict[str, str]) -> str:
    """The per-kind markdown table: counts, then median (min-max) seconds from injection."""
    lines = [
        "| fault | injected | detected | rolled | recovered | missed | s to detect | s to roll | s to recover |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows(faults):
        if r.kind in skipped:
            lines.append(f"| {r.kind} | not drawn: {skipped[r.kind]} |  |  |  |  |  |  |  |")
            continue
        detected = "n/a" if r.kind in CLUSTER_FAULTS else str(r.detected)
        lines.append(
            f"| {r.kind} | {r.injected} | {detected} | {r.rolled} | {r.recovered} | {r.missed} | "
            f"{'n/a' if r.kind in CLUSTER_FAULTS else _fmt(r.detect_s)} | {_fmt(r.roll_s)} | {_fmt(r.recover_s)} |"
        )
    return "\n".join(lines)


def plot(path: Path, faults: Sequence[Fault], requests: Sequence[Request], *, services: Sequence[str]) -> None:
    """A timeline: each fault as a bar from injection to recovery (dot at detection, cross at the roll), and
    under it the clients' completed and failed requests per 10 s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True, height_ratios=[3, 1.4])
    kinds = [k for k in ALL_KINDS if any(f.kind == k for f in faults)]
    colours = {k: f"C{i}" for i, k in enumerate(kinds)}
    for i, f in enumerate(faults):
        end = f.recovered if f.recovered is not None else f.injected
        top.plot([f.injected, end], [i, i], color=colours[f.kind], linewidth=5, solid_capstyle="butt")
        if f.detected is not None:
            top.plot([f.detected], [i], "o", color="black", markersize=3)
        if f.rolled is not None:
            top.plot([f.rolled], [i], "x", color="black", markersize=5)
        if f.missed:
            top.plot([f.injected], [i], "s", color="red", markersize=5)
    for kind in kinds:
        top.plot([], [], color=colours[kind], linewidth=5, label=kind)
    top.set_ylabel("fault (in order)")
    top.legend(loc="upper left", fontsize=7, ncol=4)
    top.set_title(f"chaos soak: {len(services)} services; bar = injected..recovered, o detected, x rolled")
    if requests:
        end = max(r.end for r in requests)
        edges = list(range(0, int(end) + 10, 10))
        ok = [sum(1 for r in requests if r.ok and a <= r.end < a + 10) for a in edges]
        bad = [sum(1 for r in requests if not r.ok and a <= r.end < a + 10) for a in edges]
        bottom.bar(edges, ok, width=9, align="edge", color="tab:green", label="completed")
        bottom.bar(edges, bad, width=9, align="edge", bottom=ok, color="tab:red", label="failed")
        bottom.legend(loc="upper left", fontsize=7)
    bottom.set_ylabel("requests / 10 s")
    bottom.set_xlabel("seconds since the load started")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
