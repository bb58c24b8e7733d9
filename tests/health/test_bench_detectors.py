"""The trace-replay benchmark's verdict for our policy: every target met, no false roll (deterministic)."""

import pytest

from perf.detectors import POLICIES, evaluate, scenarios


@pytest.mark.parametrize("case", scenarios(), ids=lambda c: c.name)
def test_ours_meets_the_target_without_false_rolls(case: object) -> None:
    detected, delay, false = evaluate(case, POLICIES["ours"])  # type: ignore[arg-type]
    assert false == 0
    if case.fault_at is not None:  # type: ignore[attr-defined]
        assert detected == "yes"
        assert float(delay.rstrip("s")) <= case.target  # type: ignore[attr-defined]


def test_health_endpoint_peers_miss_every_fault() -> None:
    faults = [c for c in scenarios() if c.fault_at is not None]
    assert all(evaluate(c, POLICIES["kubelet /health"])[0] == "no" for c in faults)
