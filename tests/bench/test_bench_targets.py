"""`aisctl bench --service`: which URLs are measured and which spec the result says was measured; and an
engine that cannot be reached is a FAIL result, never a traceback or exit 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascend_operator.api.constants import ANNOTATION_SPEC_HASH
from ascend_operator.bench import snapshots as m
from ascend_operator.bench.targets import Url, ais_info, service_urls
from ascend_operator.cli.main import main


def pod(name: str, ip: str | None, *, phase: str = "Running", port: int = 8000, digest: str = "abc") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {ANNOTATION_SPEC_HASH: digest}},
        "spec": {"containers": [{"name": "engine", "ports": [{"name": "http", "containerPort": port}]}]},
        "status": {"phase": phase, "podIP": ip},
    }


SERVICE = {"spec": {"clusterIP": "10.96.0.12", "ports": [{"name": "http", "port": 8000}]}}


def test_each_running_pod_then_the_service_summed_over_the_pods() -> None:
    pods = [pod("svc-1", "127.1.0.3"), pod("svc-0", "127.1.0.2", port=9000), pod("svc-2", None, phase="Pending")]
    assert service_urls(pods=pods, service=SERVICE, default_port=8000) == [
        Url("svc-0", "http://127.1.0.2:9000", ("http://127.1.0.2:9000",)),
        Url("svc-1", "http://127.1.0.3:8000", ("http://127.1.0.3:8000",)),
        Url("service", "http://10.96.0.12:8000", ("http://127.1.0.2:9000", "http://127.1.0.3:8000")),
    ]


def test_no_service_url_without_pods_or_for_a_headless_service() -> None:
    assert service_urls(pods=[], service=SERVICE, default_port=8000) == []
    headless = {"spec": {"clusterIP": "None", "ports": [{"port": 8000}]}}
    assert [u.label for u in service_urls(pods=[pod("a", "127.1.0.2")], service=headless, default_port=8000)] == ["a"]


def test_ais_info_says_whether_every_pod_runs_the_current_spec() -> None:
    pods = [pod("a", "127.1.0.2"), pod("b", "127.1.0.3", digest="old")]
    assert ais_info(name="x", namespace="ns", spec_hash="abc", pods=pods) == {
        "name": "x",
        "namespace": "ns",
        "spec_hash": "abc",
        "pod_spec_hashes": {"a": "abc", "b": "old"},
        "pods_at_spec_hash": False,
    }
    assert ais_info(name="x", namespace="ns", spec_hash="abc", pods=pods[:1])["pods_at_spec_hash"] is True


def test_merged_scrapes_of_two_pods_sum_and_keep_engines_apart() -> None:
    text = '# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{engine="0"} %d\n'
    merged = m.merge([m.parse_metrics(text % 100), m.parse_metrics(text % 50)])
    assert merged.total(m.GENERATION_TOKENS) == 150
    assert merged.per_engine(m.GENERATION_TOKENS) == {"0/0": 100, "1/0": 50}


def test_an_unreachable_engine_is_a_fail_result_with_exit_1(tmp_path: Path) -> None:
    out = tmp_path / "r"
    code = main(["bench", "prefill", "--url", "http://127.0.0.1:9", "--out", str(out), "--no-progress"])
    result = json.loads((out / "result.json").read_text())
    assert (code, result["verdict"]) == (1, "FAIL")
    assert result["failed"] == ["run_completed", "result_complete"]
    assert "points (none measured)" in result["checks"][-1]["detail"]
