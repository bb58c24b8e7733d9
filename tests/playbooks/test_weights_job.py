"""examples/weights-check-job.yaml: its check script, run for real on model directories made here.

Why: the Job is what tells a user, before an engine spends minutes loading ~292 GB, that a node's copy
of the weights is incomplete. Its script must fail, naming the shard, on a missing or empty shard or a
wrong count, and pass a complete directory; and the Job must look where the example service looks.
"""

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.examples import ROOT

JOB: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "weights-check-job.yaml").read_text())
POD = JOB["spec"]["template"]["spec"]
(CONTAINER,) = POD["containers"]
ENV = {e["name"]: e.get("value") for e in CONTAINER["env"]}


def run_check(model: Path, *, expected: int) -> subprocess.CompletedProcess[str]:
    assert CONTAINER["command"] == ["python3", "-c"]
    env = {"MODEL_DIR": str(model), "EXPECTED_SHARDS": str(expected), "NODE_NAME": "atlas-a2-0"}
    return subprocess.run(
        [sys.executable, "-c", CONTAINER["args"][0]], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def make_model(root: Path, shards: int) -> list[str]:
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    weight_map = {f"layers.{i}.weight": name for i, name in enumerate(names)} | {"embed.weight": names[0]}
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for name in names:
        (root / name).write_bytes(b"\0" * 1024)
    return names


def test_complete_directory_passes(tmp_path: Path) -> None:
    make_model(tmp_path, 3)
    res = run_check(tmp_path, expected=3)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"atlas-a2-0: {tmp_path}: 3 shards, 0.0 GB, all present"


def test_missing_and_empty_shards_are_named(tmp_path: Path) -> None:
    names = make_model(tmp_path, 4)
    (tmp_path / names[1]).unlink()
    (tmp_path / names[3]).write_bytes(b"")
    res = run_check(tmp_path, expected=4)
    assert res.returncode == 1
    assert res.stderr.strip() == f"atlas-a2-0: {tmp_path}: {names[1]} is missing; {names[3]} is empty"


def test_another_shard_count_fails(tmp_path: Path) -> None:
    make_model(tmp_path, 3)
    res = run_check(tmp_path, expected=75)
    assert res.returncode == 1
    assert "the index names 3 shards, expected 75" in res.stderr


def test_directory_without_index_fails(tmp_path: Path) -> None:
    res = run_check(tmp_path, expected=75)
    assert res.returncode == 1
    assert res.stderr.startswith(f"atlas-a2-0: cannot read {tmp_path}/model.safetensors.index.json")


def test_job_checks_what_the_example_serves(example_body: dict[str, Any]) -> None:
    spec = example_body["spec"]
    (volume,) = POD["volumes"]
    (mount,) = CONTAINER["volumeMounts"]
    assert volume["hostPath"]["path"] == spec["model"]["source"]["hostPath"]["path"]
    assert mount["mountPath"] == ENV["MODEL_DIR"] == spec["model"]["path"]
    assert CONTAINER["image"] == spec["image"]
    assert POD["nodeSelector"] == spec["scheduling"]["nodeSelector"]
    # The shard count is the seed's (docs/FACTS.md: "~292 GB in 75 shards").
    facts = (ROOT / "docs" / "FACTS.md").read_text()
    match = re.search(r"~292 GB in (\d+) shards", facts)
    assert match is not None
    assert ENV["EXPECTED_SHARDS"] == match.group(1)


@pytest.mark.parametrize("key", ["parallelism", "completions"])
def test_one_pod_per_node(key: str) -> None:
    (term,) = POD["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= JOB["spec"]["template"]["metadata"]["labels"].items()
    assert JOB["spec"][key] == JOB["spec"]["parallelism"]
