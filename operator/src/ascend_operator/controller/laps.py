"""Where a reconcile pass spent its time, lap by lap: the pods list, the rollout plan, each row of
controller/steps.py, the status patch.

Why: on a loaded CI host a spec change drained 16-18 s after its patch (~1 s on a quiet one) and the passes
took 11-13 s, yet no single step reached the 2 s a step was once logged at: the time was spread over many
API calls, or spent outside the steps. A slow pass now logs every lap that took a visible share of it, so
the line says whether the API server, one step, or the pass's own reads held it.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

#: Laps shorter than this are left out of a slow pass's line (they explain none of it).
VISIBLE_SECONDS = 0.1


@dataclass(kw_only=True)
class Laps:
    """A stopwatch read at the end of each phase of a pass; `clock` is monotonic seconds."""

    clock: Callable[[], float]
    laps: list[tuple[str, float]] = field(default_factory=list)
    _mark: float = field(init=False)

    def __post_init__(self) -> None:
        self._mark = self.clock()

    def start(self) -> None:
        """Begin (or begin again: a pass retried after an error starts from zero)."""
        self.laps.clear()
        self._mark = self.clock()

    def lap(self, name: str) -> None:
        """End the phase `name` now; the next phase starts here."""
        now = self.clock()
        self.laps.append((name, now - self._mark))
        self._mark = now

    def total(self) -> float:
        return sum(took for _, took in self.laps)

    def summary(self) -> str:
        """The visible laps, slowest first, e.g. `engines 10.0s, status 1.2s`; repeated names add up."""
        spent: dict[str, float] = {}
        for name, took in self.laps:
            spent[name] = spent.get(name, 0.0) + took
        shown = sorted(((t, n) for n, t in spent.items() if t >= VISIBLE_SECONDS), reverse=True)
        return ", ".join(f"{name} {took:.1f}s" for took, name in shown) or "no phase over 0.1s"
