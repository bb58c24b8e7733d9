"""Speculative-decoding acceptance: how many of the k drafted tokens each verify step accepts.

Why this module exists: DSpark's value is accepted advancement per step (docs/FACTS.md "Speculative decoding"),
and the detectors read per-position acceptance from vLLM's counters. Acceptance is a prefix: position i can
only be accepted if 0..i-1 were, so one uniform draw u per step gives accepted = #{i : u < rate_i} with
P(accepted > i) = rate_i, the per-position rate vLLM reports as per_pos[i] / num_drafts. Draws follow a
golden-ratio (low-discrepancy) sequence from a per-request seed, so short runs already hit the profile's
mean instead of wandering by sampling noise, and every run is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

_GOLDEN = 0.6180339887498949


def accepted_for(u: float, rates: Sequence[float]) -> int:
    """Number of accepted draft tokens for draw u in [0, 1)."""
    n = 0
    for rate in rates:
        if u >= rate:
            break
        n += 1
    return n


@dataclass
class AcceptanceStream:
    """Per-request sequence of acceptance outcomes."""

    rates: tuple[float, ...]
    seed: int
    _n: int = field(default=0)

    def next_accepted(self) -> int:
        u0 = (self.seed % 1_000_003) / 1_000_003
        u = (u0 + self._n * _GOLDEN) % 1.0
        self._n += 1
        return accepted_for(u, self.rates)


@dataclass
class SpecStats:
    """Counters in the shape of vLLM's SpecDecodingStats (vllm/v1/spec_decode/metrics.py)."""

    num_spec_tokens: int
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.accepted_per_pos:
            self.accepted_per_pos = [0] * self.num_spec_tokens

    def observe_draft(self, *, num_draft_tokens: int, num_accepted_tokens: int) -> None:
        self.num_drafts += 1
        self.num_draft_tokens += num_draft_tokens
        self.num_accepted_tokens += num_accepted_tokens
        for i in range(num_accepted_tokens):
            self.accepted_per_pos[i] += 1
