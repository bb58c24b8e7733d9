"""`aisctl render | plan | crd` as a user runs them: exit codes, stdout, stderr."""

import subprocess
import sys
from pathlib import Path

import yaml

from ascend_operator.validation.rules import RULES
from tests.fixtures.examples import EXAMPLE


def aisctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ascend_operator.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def test_render_prints_pod_service_network_policy_and_budget_and_nothing_on_stderr() -> None:
    result = aisctl("render", "-f", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout)]
    assert kinds == ["NetworkPolicy", "Pod", "Service", "PodDisruptionBudget"]  # as a pass applies them


def test_render_of_a_two_node_spec_prints_one_leader_worker_set_the_service_and_the_group_budget() -> None:
    result = aisctl("render", "-f", str(EXAMPLE.parent / "dsr1-2node.yaml"))
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert names == [
        ("NetworkPolicy", "dsr1"),
        ("LeaderWorkerSet", "dsr1-group"),
        ("Service", "dsr1"),
        ("PodDisruptionBudget", "dsr1"),
    ]
    # one replica of two nodes, minAvailable 1 (a replica): a drain may evict neither pod of the only group
    assert docs[-1]["spec"]["minAvailable"] == 2


def test_render_of_a_pd_split_prints_the_role_services_what_each_becomes_and_the_router_in_pd_mode() -> None:
    result = aisctl("render", "-f", str(EXAMPLE.parent / "dsv4-flash-pd.yaml"))
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    pods = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Pod"}
    assert sorted(pods) == ["dsv4-flash-pd-decode-0", "dsv4-flash-pd-prefill-0"]  # no aggregated engine
    roles = {d["metadata"]["name"] for d in docs if d["kind"] == "AscendInferenceService"}
    assert roles == {"dsv4-flash-pd-prefill", "dsv4-flash-pd-decode"}
    for name, kv_role in (("dsv4-flash-pd-prefill-0", "kv_producer"), ("dsv4-flash-pd-decode-0", "kv_consumer")):
        args = pods[name]["spec"]["containers"][0]["args"]
        config = args[args.index("--kv-transfer-config") + 1]
        assert '"kv_connector":"MooncakeConnectorV1"' in config
        assert f'"kv_role":"{kv_role}"' in config
    router = next(d for d in docs if d["kind"] == "Deployment")
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in args
    assert args[args.index("--prefill-selector") + 1] == "inference.ascend.dev/service=dsv4-flash-pd-prefill"
    assert args[args.index("--decode-selector") + 1] == "inference.ascend.dev/service=dsv4-flash-pd-decode"


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
    assert result.stderr == (
        "error: <stdin>: document 1 (dsv4-flash): spec.engine.gpuMemoryUtilization: "
        "Input should be less than or equal to 1\n"
    )


def test_plan_shows_the_seed_budget() -> None:
    result = aisctl("plan", "-f", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "free for KV per NPU  13.80 GiB" in result.stdout
    assert "KV pool              1,078,120 tokens" in result.stdout
    assert "max-length requests  1 at once (2.03 pool tokens per context token: hybrid KV)" in result.stdout
    assert "verdict              fits" in result.stdout


def test_plan_warns_on_stderr_for_a_tight_start(tmp_path: Path) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["engine"]["maxNumBatchedTokens"] = 16384
    result = aisctl("plan", "-f", "-", stdin=yaml.safe_dump(body))
    assert result.returncode == 0
    assert "warning: <stdin>: document 1 (dsv4-flash): spec.engine.maxNumBatchedTokens" in result.stderr
    assert "verdict              tight" in result.stdout


def test_missing_file_is_a_clear_error() -> None:
    result = aisctl("render", "-f", "/nonexistent/x.yaml")
    assert (result.returncode, result.stderr) == (2, "error: /nonexistent/x.yaml: No such file\n")


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
    assert unknown.startswith(f"error: {bad}: document 1 (dsv4-flash): spec.engine.extraArgs:")
    assert "(unknown: --no-such-flag)" in unknown
    repeat = next(line for line in lines if "[ExtraArgsRepeatTypedFlag]" in line)
    assert repeat.startswith(f"error: {bad}: document 1 (dsv4-flash): spec.engine.extraArgs:")
    assert "(offending: -sc)" in repeat
    block = next(line for line in lines if "[BlockSizeKeptByVllmAscend]" in line)
    assert block.startswith(f"error: {bad}: document 1 (dsv4-flash): spec.engine.blockSize:")
    assert "(7 would run as 32)" in block


def test_render_takes_the_operators_npu_resource_name() -> None:
    result = aisctl("render", "-f", str(EXAMPLE), "--npu-resource", "huawei.com/ascend-1980")
    assert result.returncode == 0, result.stderr
    pod = next(doc for doc in yaml.safe_load_all(result.stdout) if doc["kind"] == "Pod")
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "160", "memory": "448Gi", "ephemeral-storage": "100Gi", "huawei.com/ascend-1980": "8"}


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "ais.yaml"
    path.write_text(text)
    return str(path)


def example_with(**meta: str) -> dict[str, object]:
    body: dict[str, object] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] = {**body["metadata"], **meta}  # type: ignore[dict-item]
    return body


def test_yaml_syntax_error_is_one_line_with_file_document_and_position(tmp_path: Path) -> None:
    good = EXAMPLE.read_text()
    path = write(tmp_path, good + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n")
    result = aisctl("render", "-f", path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}: document 2: invalid YAML: line ")
    assert "expected ',' or '}'" in lines[0]


def test_a_name_pods_and_services_cannot_have_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump(example_with(name="dsv4.flash")))
    result = aisctl("render", "-f", path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {path}: document 1 (dsv4.flash): metadata.name: 'dsv4.flash' must be a DNS-1035 label "
        "(lowercase letters, digits and '-', starting with a letter and ending with a letter or digit, at most "
        "63 characters): the Service is named after it and the pods <name>-<index>"
    ]


def test_every_error_is_reported_at_once_with_a_suggestion(tmp_path: Path) -> None:
    body = example_with(name="Bad_Name")
    spec = body["spec"]
    assert isinstance(spec, dict)
    spec["engine"]["maxNumSeq"] = 16  # misspelt maxNumSeqs
    spec["engine"]["gpuMemoryUtilization"] = 1.5  # schema
    spec["parallelism"]["tensor"] = 4  # cross-field: TP x DP != NPUs
    path = write(tmp_path, yaml.safe_dump(body))
    result = aisctl("plan", "-f", path)
    assert result.returncode == 2
    where = f"error: {path}: document 1 (Bad_Name): "
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert lines[0].startswith(where + "metadata.name: 'Bad_Name' must be a DNS-1035 label")
    assert where + "spec.engine.maxNumSeq: unknown field; did you mean 'maxNumSeqs'?" in lines
    assert where + "spec.engine.gpuMemoryUtilization: Input should be less than or equal to 1" in lines
    assert any(line.startswith(where + "spec.parallelism: spec.parallelism.tensor x") for line in lines)
    assert len(lines) == 4


PARALLELISM = next(rule for rule in RULES if rule.name == "ParallelismMatchesNPUs")


def test_problems_of_every_document_are_reported(tmp_path: Path) -> None:
    first = example_with(name="one")
    second = example_with(name="two")
    second["spec"]["npus"] = 0  # type: ignore[index]
    second["spec"]["parallelism"]["tensor"] = 4  # type: ignore[index]
    path = write(tmp_path, yaml.safe_dump_all([first, {"kind": "ConfigMap", "apiVersion": "v1"}, "oops", second]))
    result = aisctl("render", "-f", path)
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error: ")] == [
        f"error: {path}: document 3: expected a Kubernetes object (a mapping), got str",
        f"error: {path}: document 4 (two): spec.npus: Input should be greater than or equal to 1",
        f"error: {path}: document 4 (two): spec.parallelism: {PARALLELISM.message} [ParallelismMatchesNPUs]",
    ]


def test_namespace_flag_sets_the_namespace_and_refuses_a_conflict(tmp_path: Path) -> None:
    result = aisctl("render", "-n", "llm", "-f", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert {doc["metadata"]["namespace"] for doc in yaml.safe_load_all(result.stdout)} == {"llm"}
    path = write(tmp_path, yaml.safe_dump(example_with(namespace="prod")))
    clash = aisctl("render", "--namespace", "llm", "-f", path)
    assert clash.returncode == 2
    assert clash.stderr == (
        f"error: {path}: document 1 (dsv4-flash): metadata.namespace: 'prod' does not match --namespace 'llm'; "
        "pass --namespace=prod\n"
    )


def test_version_and_other_bad_inputs_without_traceback(tmp_path: Path) -> None:
    version = aisctl("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("aisctl 0.1.0 (inference.ascend.dev/v1alpha1)")
    empty = aisctl("render", "-f", write(tmp_path, "# nothing\n"))
    assert (empty.returncode, empty.stderr) == (
        2,
        f"error: {tmp_path / 'ais.yaml'}: no AscendInferenceService in the file\n",
    )
    directory = aisctl("plan", "-f", str(tmp_path))
    assert directory.returncode == 2
    assert directory.stderr == f"error: {tmp_path}: Is a directory\n"
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    undecodable = aisctl("render", "-f", str(binary))
    assert undecodable.returncode == 2
    assert undecodable.stderr.startswith(f"error: {binary}: not UTF-8 text")
    no_spec = aisctl(
        "render",
        "-f",
        "-",
        stdin="apiVersion: inference.ascend.dev/v1alpha1\nkind: AscendInferenceService\nmetadata: {name: x}\n",
    )
    assert (no_spec.returncode, no_spec.stderr) == (2, "error: <stdin>: document 1 (x): spec: required (a mapping)\n")
    for result in (empty, directory, undecodable, no_spec):
        assert "Traceback" not in result.stderr
