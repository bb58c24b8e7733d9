"""`aisctl render | plan | crd` as a user runs them: exit codes, stdout, stderr."""

import subprocess
import sys
from pathlib import Path

import yaml

from tests.unit.conftest import EXAMPLE


def aisctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascend_operator.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_render_prints_pod_service_and_network_policy_and_nothing_on_stderr() -> None:
    result = aisctl("render", "-f", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout)]
    assert kinds == ["Pod", "Service", "NetworkPolicy"]


def test_render_of_a_two_node_spec_prints_one_leader_worker_set_and_the_service() -> None:
    result = aisctl("render", "-f", str(EXAMPLE.parent / "dsr1-2node.yaml"))
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert names == [("LeaderWorkerSet", "dsr1-group"), ("Service", "dsr1"), ("NetworkPolicy", "dsr1")]


def test_bad_spec_exits_2_naming_field_and_rule(tmp_path: Path) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["engine"]["maxNumBatchedTokens"] = 32768
    body["spec"]["parallelism"]["tensor"] = 4
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(body))
    result = aisctl("render", "-f", str(bad))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "spec.parallelism: spec.parallelism.tensor x spec.parallelism.data must equal spec.npus" in result.stderr
    assert "[ParallelismMatchesNPUs]" in result.stderr


def test_schema_error_exits_2_with_the_path(tmp_path: Path) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["engine"]["gpuMemoryUtilization"] = 1.5
    result = aisctl("render", "-f", "-", stdin=yaml.safe_dump(body))
    assert result.returncode == 2
    assert "error: spec.engine.gpuMemoryUtilization: Input should be less than or equal to 1" in result.stderr


def test_plan_shows_the_seed_budget() -> None:
    result = aisctl("plan", "-f", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "free for KV per NPU  13.80 GiB" in result.stdout
    assert "KV pool              1,078,120 tokens" in result.stdout
    assert "max-length requests  3 at once" in result.stdout
    assert "verdict              fits" in result.stdout


def test_plan_warns_on_stderr_for_a_tight_start(tmp_path: Path) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["engine"]["maxNumBatchedTokens"] = 16384
    result = aisctl("plan", "-f", "-", stdin=yaml.safe_dump(body))
    assert result.returncode == 0
    assert "warning: spec.engine.maxNumBatchedTokens" in result.stderr
    assert "verdict              tight" in result.stdout


def test_missing_file_is_a_clear_error() -> None:
    result = aisctl("render", "-f", "/nonexistent/x.yaml")
    assert result.returncode == 2
    assert "No such file" in result.stderr


def test_crd_prints_the_crd() -> None:
    result = aisctl("crd")
    assert result.returncode == 0
    assert yaml.safe_load(result.stdout)["kind"] == "CustomResourceDefinition"


def test_render_refuses_what_vllm_and_vllm_ascend_would_not_run_as_asked(tmp_path: Path) -> None:
    """An unknown flag (vLLM exits 2), `-sc` (repeats --speculative-config), blockSize 7 (rewritten to 32)."""
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["engine"]["blockSize"] = 7
    body["spec"]["engine"]["extraArgs"] = ["--no-such-flag", "-sc", '{"method":"mtp"}']
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(body))
    result = aisctl("render", "-f", str(bad))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    unknown = next(line for line in lines if "[ExtraArgsUnknownFlag]" in line)
    assert "error: spec.engine.extraArgs:" in unknown
    assert "(unknown: --no-such-flag)" in unknown
    repeat = next(line for line in lines if "[ExtraArgsRepeatTypedFlag]" in line)
    assert "error: spec.engine.extraArgs:" in repeat
    assert "(offending: -sc)" in repeat
    block = next(line for line in lines if "[BlockSizeKeptByVllmAscend]" in line)
    assert "error: spec.engine.blockSize:" in block
    assert "(7 would run as 32)" in block


def test_render_takes_the_operators_npu_resource_name() -> None:
    result = aisctl("render", "-f", str(EXAMPLE), "--npu-resource", "huawei.com/ascend-1980")
    assert result.returncode == 0, result.stderr
    pod = next(doc for doc in yaml.safe_load_all(result.stdout) if doc["kind"] == "Pod")
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "160", "memory": "448Gi", "ephemeral-storage": "100Gi", "huawei.com/ascend-1980": "8"}
