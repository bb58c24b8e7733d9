"""Engine time and the delivery of a request's tokens: the two things the step loop and the HTTP handler share.

Why apart from the engine (aissim/engine.py): the clock is the one place engine seconds become wall seconds
(`--sim-time-scale`), and a Delivery is the one hand-over from a step to the handler streaming the tokens;
neither knows what a step computes, which is the scheduler's, nor how steps are paced, which is the engine's.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from aissim.scheduler import SimRequest

MAX_LAG_WALL_S = 0.02  # behind schedule by more than this (wall seconds): slow the clock, never jump


class EngineClock:
    """Engine seconds since start = wall seconds since start x scale."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self._w0 = time.monotonic()

    def now(self) -> float:
        return (time.monotonic() - self._w0) * self.scale

    def wall_delay(self, engine_t: float) -> float:
        return engine_t / self.scale - (time.monotonic() - self._w0)

    def slip_to(self, engine_t: float) -> None:
        """The host fell behind: make engine time `engine_t` now. Engine time slows down (everyone's,
        arrivals included) instead of jumping, so no step ever looks longer than it was."""
        self._w0 = time.monotonic() - engine_t / self.scale


@dataclass(eq=False)
class Delivery:
    """What the HTTP handler awaits: tokens produced so far and whether the request finished."""

    req: SimRequest
    pending: int = 0
    done: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, new: int) -> None:
        self.pending += new
        self.done = self.req.finished
        self.changed.set()

    async def next(self) -> tuple[int, bool]:
        """Wait for new tokens; returns (count, finished)."""
        while not self.pending and not self.done:
            self.changed.clear()
            await self.changed.wait()
        new, self.pending = self.pending, 0
        return new, self.done
