"""The ramp benchmark's figures and plot (perf/ramp.py), from its rows alone: no cluster, no clock, so a
saved ramp.json can be re-read and re-plotted, and the figures are unit-tested (tests/perf/test_ramp_figures.py).

Definitions (docs/autoscaling.md "Measured" quotes them):
- scale-up: from the start of the first queue that lasted (engines' waiting > 0 at every sample for
  `lasting` seconds) to the first sample with two Ready replicas;
- scale-down: from the load falling within one replica's slots (80% of the ramp), and from the end of the
  load (idle), to the first sample after which one engine pod is left;
- NPU-hours: bound engine pods x NPUs each, integrated over the run, beside a fixed deployment at
  maxReplicas and one at the peak reached, over the same time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Sample:
    t: float
    spec_replicas: int
    bound: int
    ready: int
    waiting: float
    running: float
    engine_ttft_p90: float | None = None
    desired: int | None = None
    reason: str | None = None


@dataclass
class Counts:
    """One pod's TTFT histogram (count, count at or below the target) at its first and last scrape."""

    first: tuple[float, float]
    last: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        if self.last == (0.0, 0.0):
            self.last = self.first


def _queue_start(rows: list[Sample], lasting: float) -> float | None:
    run: float | None = None
    for row in rows:
        if row.waiting > 0:
            run = row.t if run is None else run
            if row.t - run >= lasting:
                return run
        else:
            run = None
    return None


def figures(rows: list[Sample], *, ramp_seconds: float, slots: int, max_replicas: int, npus: int,
            lasting: float = 30.0) -> dict[str, Any]:  # fmt: skip
    """The run's figures (seconds, counts, NPU-hours); None where the run never got there."""
    queued = _queue_start(rows, lasting)
    two = next((r.t for r in rows if queued is not None and r.t >= queued and r.ready >= 2), None)
    many = [i for i, r in enumerate(rows) if r.bound > 1]
    one = rows[many[-1] + 1].t if many and many[-1] + 1 < len(rows) else None
    low = 0.8 * ramp_seconds
    held = sum(r.bound * (b.t - r.t) for r, b in itertools.pairwise(rows)) * npus / 3600
    span = rows[-1].t - rows[0].t if rows else 0.0
    peak = max((r.bound for r in rows), default=0)
    return {
        "ramp_seconds": ramp_seconds,
        "run_seconds": round(span, 1),
        "queue_lasting_s": lasting,
        "sustained_queue_at_s": queued,
        "second_ready_at_s": two,
        "scale_up_s": None if queued is None or two is None else round(two - queued, 1),
        "one_replica_at_s": one,
        "scale_down_from_low_s": None if one is None else round(one - low, 1),
        "scale_down_from_idle_s": None if one is None else round(one - ramp_seconds, 1),
        "peak_replicas": peak,
        "slots_per_replica": slots,
        "npu_hours": round(held, 3),
        "npu_hours_fixed_max": round(max_replicas * npus * span / 3600, 3),
        "npu_hours_fixed_peak": round(peak * npus * span / 3600, 3),
    }


def ttft_over(pods: dict[str, Counts]) -> dict[str, float]:
    """Requests the engines answered, and those whose TTFT was above the target bucket."""
    total = sum(c.last[0] - c.first[0] for c in pods.values())
    within = sum(c.last[1] - c.first[1] for c in pods.values())
    return {"engine_requests": total, "ttft_over_target": total - within}


def table(found: dict[str, Any]) -> str:
    saved = 1 - found["npu_hours"] / found["npu_hours_fixed_max"] if found["npu_hours_fixed_max"] else 0.0
    lines = [
        "| figure | value |",
        "|---|---|",
        f"| ramp (s) / whole run (s) | {found['ramp_seconds']:.0f} / {found['run_seconds']:.0f} |",
        f"| sustained queue -> second Ready replica (s) | {found['scale_up_s']} |",
        f"| load within one replica -> one replica (s) | {found['scale_down_from_low_s']} |",
        f"| idle -> one replica (s) | {found['scale_down_from_idle_s']} |",
        f"| peak replicas | {found['peak_replicas']} |",
        f"| requests answered by the engines | {found.get('engine_requests', 0):.0f} |",
        f"| requests with TTFT over the target | {found.get('ttft_over_target', 0):.0f} |",
        f"| NPU-hours autoscaled / fixed at max / fixed at peak | {found['npu_hours']} / "
        f"{found['npu_hours_fixed_max']} / {found['npu_hours_fixed_peak']} ({saved:.0%} saved against max) |",
        f"| scale events up / panic up / down | {found.get('events', {}).get('ScaledUp')} / "
        f"{found.get('events', {}).get('PanicScaledUp')} / {found.get('events', {}).get('ScaledDown')} |",
        f"| client requests ok / failed | {found.get('ok')} / {found.get('failed')} |",
    ]
    return "\n".join(lines) + "\n"


def plot(rows: list[Sample], clients: list[tuple[float, int]], *, target: float, ramp_seconds: float,
         path: Path) -> None:  # fmt: skip
    """Replicas (spec, bound, Ready) with the clients; the engines' queue; engine TTFT p90 and the target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [r.t / 60 for r in rows]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True)
    ax1.step(minutes, [r.spec_replicas for r in rows], where="post", label="spec.replicas")
    ax1.step(minutes, [r.bound for r in rows], where="post", label="engine pods (holding NPUs)")
    ax1.step(minutes, [r.ready for r in rows], where="post", label="Ready")
    ax1.set(ylabel="replicas", title="spec.autoscaling under a ramp (aissim at the seed's figures)")
    twin = ax1.twinx()
    twin.plot([t / 60 for t, _ in clients], [c for _, c in clients], color="grey", alpha=0.4, label="clients")
    twin.set_ylabel("closed-loop clients (grey)")
    ax2.plot(minutes, [r.waiting for r in rows], label="waiting")
    ax2.plot(minutes, [r.running for r in rows], label="running")
    ax2.set(ylabel="requests (all engines)")
    ax3.plot(minutes, [r.engine_ttft_p90 if r.engine_ttft_p90 is not None else float("nan") for r in rows],
             label="engine TTFT p90 (30 s, status.autoscaling)")  # fmt: skip
    ax3.axhline(target, color="red", linestyle="--", label=f"target {target:g} s")
    ax3.set(ylabel="seconds", xlabel="minutes")
    for ax in (ax1, ax2, ax3):
        ax.axvline(ramp_seconds / 60, color="black", alpha=0.3, linestyle=":")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
