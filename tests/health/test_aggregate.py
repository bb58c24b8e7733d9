"""Service figures for `kubectl get ais` from several pods' scrapes."""

import pytest

from ascend_operator.health.aggregate import service_metrics
from ascend_operator.health.samples import EngineSample

INF = float("inf")


def pod(gen_rate: float, kv: float, *, running: float = 8) -> list[EngineSample]:
    return [
        EngineSample(
            t=t,
            running=running,
            kv_usage=kv,
            generation_tokens=gen_rate * t,
            spec_drafts=10 * t,
            spec_accepted=12 * t,
            spec_accepted_per_pos={0: 6 * t, 1: 4 * t},
            ttft=((0.5, t), (1.0, 2 * t), (INF, 2 * t)),
            tpot=((0.05, 3 * t), (INF, 3 * t)),
        )
        for t in (0.0, 10.0, 20.0, 30.0)
    ]


def test_two_pods_sum_throughput_and_take_the_fullest_kv() -> None:
    out = service_metrics([pod(100.0, 0.2), pod(50.0, 0.7)], now=30.0).model_dump(
        by_alias=True, exclude_unset=True
    )  # as written
    metrics = out["metrics"]
    assert metrics["tokensPerSecond"] == pytest.approx(150.0)
    assert metrics["kvCacheUsage"] == pytest.approx(0.7)
    assert metrics["runningRequests"] == 16
    assert metrics["acceptanceLength"] == pytest.approx(2.2)
    assert "acceptancePerPosition" not in metrics  # per position is shown for a single pod only
    assert metrics["ttftP50Seconds"] == pytest.approx(0.5)
    assert out["tokensPerSecondDisplay"] == "150.0"
    assert out["kvCacheUsageDisplay"] == "70.0%"


def test_single_pod_shows_acceptance_per_position() -> None:
    metrics = service_metrics([pod(100.0, 0.2)], now=30.0).model_dump(by_alias=True, exclude_unset=True)["metrics"]
    assert metrics["acceptancePerPosition"] == [0.6, 0.4]


def test_no_scrapes_clears_the_figures() -> None:
    assert service_metrics([], now=30.0).model_dump(
        by_alias=True, exclude_unset=True
    ) == {  # nulls: the stored figures are cleared
        "metrics": None,
        "tokensPerSecondDisplay": None,
        "kvCacheUsageDisplay": None,
    }
