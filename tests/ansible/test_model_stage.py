"""playbooks/stage-model.yml against stand-in nodes: a fake model served over HTTP from this machine is
staged on an arm64 node with every file checked against the manifest, a rerun changes nothing, `--check`
names exactly the missing shard, and a corrupted shard on the server fails naming it. The same model in an
S3 bucket (moto's S3 server with authentication on, hack/s3-server.sh) is staged on an amd64 node that
holds the first bytes of one shard from an interrupted download: a wrong secret key fails naming S3's
refusal, the right one fetches only the rest of that shard (one ranged GET), and a rerun changes nothing.

The node's sshd runs in its own mount/PID/UTS namespaces but shares this machine's network namespace, so
the node reaches the `python -m http.server` below on 127.0.0.1, like the URL-sourced packages of
test_site.py.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.ansible._node import Node, free_port, start_node
from tests.ansible._runner import Run, run_playbook
from tests.ansible._standin import STANDIN_DIR

pytestmark = [pytest.mark.ansible, pytest.mark.slow, pytest.mark.timeout(1800)]

MODEL = "tiny-910b"
DEST = "/var/lib/ascend-models"
FACT_FILE = "/etc/ansible/facts.d/ascend_models.fact"
NODE_NAME = "atlas-standin"
# Three safetensors shards of a few KiB and a config file, as a real Hugging Face model directory has.
SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)] + ["config.json"]
MISSING = SHARDS[1]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fake_model(model: Path) -> tuple[dict[str, str], bytes]:
    """Write the fake model and its manifest (as `sha256sum *` writes it) into `model`: digests, manifest."""
    model.mkdir(parents=True)
    digests = {}
    for i, name in enumerate(SHARDS):
        data = (f"{name}\n".encode() * 400)[: 3000 + 512 * i]
        (model / name).write_bytes(data)
        digests[name] = sha256(data)
    manifest = "".join(f"{digests[name]}  {name}\n" for name in sorted(SHARDS)).encode()
    (model / "manifest.sha256").write_bytes(manifest)
    return digests, manifest


@dataclass
class Served:
    url: str
    directory: Path
    digests: dict[str, str]
    manifest_sha256: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The fake model and its manifest (as `sha256sum *` writes it) behind `python -m http.server`."""
    www = tmp_path_factory.mktemp("model-www")
    model = www / MODEL
    digests, manifest = fake_model(model)
    port = free_port()
    log = (www.parent / f"{www.name}-http.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(www), str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if server.poll() is not None:
                raise RuntimeError("python -m http.server exited")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield Served(f"http://127.0.0.1:{port}/{MODEL}", model, digests, sha256(manifest))
    finally:
        server.terminate()  # this PID only
        server.wait(timeout=30)
        log.close()


def stage(node: Node, *, tmp: Path, group_vars: dict[str, Any], check: bool = False) -> Run:
    """One `ansible-playbook stage-model.yml` with the test inventory of _runner (same config, same env)."""
    return run_playbook(node, tmp=tmp, group_vars=group_vars, check=check, playbook="stage-model.yml")


def on_node(node: Node, *argv: str) -> None:
    """Run a command on the node over its ssh (a file removed behind the overlay's back may stay cached)."""
    subprocess.run(
        [
            "ssh",
            "-i",
            str(node.key),
            "-p",
            str(node.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "root@127.0.0.1",
            *argv,
        ],
        check=True,
        timeout=120,
    )


def items(run: Run, task: str, status: str) -> list[str]:
    """Loop items of `TASK [model_stage : <task>]` whose result line has `status`."""
    section = run.output.split(f"TASK [model_stage : {task}]", 1)[1].split("\nTASK [", 1)[0]
    return re.findall(rf"^{status}: \[standin[^\]]*\] (?:=> )?\(item=([^)]+)\)", section, re.MULTILINE)


@dataclass
class Staged:
    runs: dict[str, Run] = field(default_factory=dict)
    # node path -> SHA-256 of the model directory's files, after each run
    files: dict[str, dict[str, str]] = field(default_factory=dict)
    written: dict[str, dict[str, str]] = field(default_factory=dict)
    fact: dict[str, Any] = field(default_factory=dict)
    kubectl_calls: list[list[str]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    # run -> (method, object, status) of every request the S3 store answered until the end of that run
    requests: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)


def model_files(node: Node) -> dict[str, str]:
    found = node.path(f"{DEST}/{MODEL}")
    if found is None:
        return {}
    return {str(p.relative_to(found)): sha256(p.read_bytes()) for p in sorted(found.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def staged(roots: dict[str, Path], ssh_key: Path, served: Served, tmp_path_factory: pytest.TempPathFactory) -> Staged:
    """First run, rerun, shard removed on the node then --check, shard corrupted on the server then a run."""
    tmp = tmp_path_factory.mktemp("model-stage")
    cluster = tmp / "cluster.json"
    cluster.write_text(json.dumps({"nodes": {NODE_NAME: {"kubernetes.io/arch": "arm64"}}}))
    values = {
        "model_stage_name": MODEL,
        "model_stage_base_url": served.url,
        "model_stage_dest": DEST,
        # The overlay's free space is this machine's disk's; keep the check, with a reserve CI has.
        "model_stage_reserve_mib": 16,
        "model_stage_kubectl": str(STANDIN_DIR / "kubectl"),
        "model_stage_kubeconfig": str(cluster),
        "model_stage_node_name": NODE_NAME,
    }
    out = Staged()
    node = start_node(lower=roots["arm64"], workdir=tmp / "node", key=ssh_key)
    try:

        def record(name: str, run: Run) -> None:
            out.runs[name] = run
            out.files[name] = model_files(node)
            out.written[name] = node.written()

        record("first", stage(node, tmp=tmp / "ansible", group_vars=values))
        record("second", stage(node, tmp=tmp / "ansible", group_vars=values))
        out.fact = json.loads(node.read(FACT_FILE)) if node.exists(FACT_FILE) else {}
        on_node(node, "rm", "-f", f"{DEST}/{MODEL}/{MISSING}")
        out.written["removed"] = node.written()
        record("check", stage(node, tmp=tmp / "ansible", group_vars=values, check=True))
        corrupted = served.directory / MISSING
        corrupted.write_bytes(corrupted.read_bytes()[:-1] + b"!")
        record("corrupted", stage(node, tmp=tmp / "ansible", group_vars=values))
    finally:
        node.stop()
    cluster_state = json.loads(cluster.read_text())
    out.kubectl_calls = cluster_state.get("calls", [])
    out.labels = cluster_state["nodes"][NODE_NAME]
    return out


def test_first_run_stages_every_shard_with_its_digest(staged: Staged, served: Served) -> None:
    first = staged.runs["first"]
    assert first.rc == 0, first.output[-5000:]
    assert first.recap["changed"] > 0
    assert staged.files["first"] == served.digests
    assert sorted(items(first, "Fetch the missing files", "changed")) == sorted(SHARDS)
    # Nothing but the model directory and the fact file: no temporary download left behind.
    model_dir = f"{DEST}/{MODEL}".lstrip("/")
    assert sorted(p for p in staged.written["first"] if p.startswith(model_dir + "/")) == sorted(
        f"{model_dir}/{name}" for name in SHARDS
    )


def test_second_run_changes_nothing(staged: Staged) -> None:
    second = staged.runs["second"]
    assert second.rc == 0, second.output[-5000:]
    assert second.recap["changed"] == 0, second.output[-5000:]
    assert f"{len(SHARDS)} of {len(SHARDS)} file(s) already staged with the right SHA-256; nothing to fetch" in (
        second.text
    )
    assert staged.written["second"] == staged.written["first"], "the rerun wrote files"


def test_node_records_the_manifest_digest(staged: Staged, served: Served) -> None:
    assert staged.fact == {MODEL: served.manifest_sha256}
    assert staged.labels[f"inference.ascend.dev/model-{MODEL}"] == served.manifest_sha256[:16]
    labels = [call for call in staged.kubectl_calls if call[0] == "label"]
    assert len(labels) == 1, staged.kubectl_calls  # only the first run writes the label


def test_check_reports_exactly_the_missing_shard(staged: Staged) -> None:
    check = staged.runs["check"]
    assert check.rc == 0, check.output[-5000:]
    assert f"to fetch: {MISSING}." in check.text
    assert items(check, "Fetch the missing files", "changed") == [MISSING]
    assert items(check, "Fetch the missing files", "ok") == []
    assert check.recap["changed"] == 1
    assert MISSING not in staged.files["check"]
    assert staged.written["check"] == staged.written["removed"], "--check wrote files"


def test_corrupted_shard_fails_naming_it(staged: Staged, served: Served) -> None:
    run = staged.runs["corrupted"]
    assert run.rc != 0
    assert f"1 file(s) of {MODEL} could not be staged on standin: {MISSING} (SHA-256 in the manifest" in run.text
    assert served.digests[MISSING] in run.text
    # The bad download never takes the shard's name, and the good shards stay.
    assert staged.files["corrupted"] == {k: v for k, v in served.digests.items() if k != MISSING}
    assert staged.written["corrupted"] == staged.written["removed"]


BUCKET, PREFIX = "weights", f"models/{MODEL}"
RESUMED = SHARDS[0]
PART_BYTES = 1500
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class S3Store:
    endpoint: str
    access_key_id: str
    secret_access_key: str
    log: Path

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, object path under PREFIX, status) of every request the store answered so far."""
        out = []
        for line in ANSI.sub("", self.log.read_text()).splitlines():
            found = re.search(rf'"(GET|HEAD) /{BUCKET}/{PREFIX}/(\S+) HTTP/1\.1" (\d+)', line)
            if found:
                out.append((found[1], found[2], int(found[3])))
        return out


@pytest.fixture(scope="module")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Store]:
    """The served model's files in a bucket of moto's S3 server; only a read-only user's keys get in."""
    moto = subprocess.run(
        ["bash", str(Path(__file__).parents[2] / "hack" / "s3-server.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    python = Path(moto.stdout.strip().splitlines()[-1]).parent / "python"
    tmp = tmp_path_factory.mktemp("s3")
    fake_model(tmp / MODEL)  # its own copy: the HTTP scenario corrupts a shard of the served one
    log = tmp / "requests.log"
    with log.open("wb") as err:
        store = subprocess.Popen(
            [str(python), str(Path(__file__).parent / "_s3_store.py"), BUCKET, PREFIX, str(tmp / MODEL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert store.stdout is not None
        keys = json.loads(store.stdout.readline() or "null")
        assert keys, f"the S3 store did not start: {log.read_text()[-3000:]}"
        yield S3Store(keys["endpoint"], keys["access_key_id"], keys["secret_access_key"], log)
    finally:
        store.terminate()  # this PID only
        store.wait(timeout=30)


@pytest.fixture(scope="module")
def staged_s3(
    roots: dict[str, Path], ssh_key: Path, s3_store: S3Store, tmp_path_factory: pytest.TempPathFactory
) -> Staged:
    """A wrong secret key, then the right one, then a rerun, on a node with RESUMED's first bytes in .part."""
    tmp = tmp_path_factory.mktemp("model-stage-s3")
    values = {
        "model_stage_name": MODEL,
        "model_stage_base_url": f"s3://{BUCKET}/{PREFIX}",
        "model_stage_s3_endpoint_url": s3_store.endpoint,
        "model_stage_s3_access_key_id": s3_store.access_key_id,
        "model_stage_s3_secret_access_key": s3_store.secret_access_key,
        "model_stage_dest": DEST,
        "model_stage_reserve_mib": 16,
    }
    # What an interrupted download leaves: the shard's first bytes under <shard>.part.
    data = (f"{RESUMED}\n" * 400)[:3000]
    part = {f"{DEST}/{MODEL}/{RESUMED}.part": data[:PART_BYTES]}
    out = Staged()
    node = start_node(lower=roots["amd64"], workdir=tmp / "node", key=ssh_key, extra_files=part)
    try:
        out.written["seeded"] = node.written()
        for name, over in (
            ("bad-key", {"model_stage_s3_secret_access_key": "not-the-secret"}),
            ("first", {}),
            ("second", {}),
        ):
            out.runs[name] = stage(node, tmp=tmp / "ansible", group_vars=values | over)
            out.files[name] = model_files(node)
            out.written[name] = node.written()
            out.requests[name] = s3_store.requests()
    finally:
        node.stop()
    return out


def test_a_wrong_s3_secret_fails_with_the_stores_refusal_and_writes_nothing(staged_s3: Staged) -> None:
    run = staged_s3.runs["bad-key"]
    assert run.rc != 0
    assert "cannot read the manifest: GET" in run.text
    assert "HTTP 403 SignatureDoesNotMatch" in run.text, run.output[-3000:]
    assert "not-the-secret" not in run.output
    assert staged_s3.written["bad-key"] == staged_s3.written["seeded"]
    assert staged_s3.requests["bad-key"] == [("GET", "manifest.sha256", 403)]


def test_s3_staging_resumes_the_interrupted_shard_and_fetches_the_others_whole(
    staged_s3: Staged, served: Served
) -> None:
    first = staged_s3.runs["first"]
    assert first.rc == 0, first.output[-5000:]
    assert staged_s3.files["first"] == served.digests  # no .part left, every file whole and right
    gets = [(path, status) for method, path, status in staged_s3.requests["first"][1:] if method == "GET"]
    assert sorted(gets) == sorted([("manifest.sha256", 200), (RESUMED, 206)] + [(f, 200) for f in SHARDS[1:]])
    assert staged_s3.requests["second"][len(staged_s3.requests["first"]) :] == [("GET", "manifest.sha256", 200)]


def test_s3_rerun_changes_nothing(staged_s3: Staged) -> None:
    second = staged_s3.runs["second"]
    assert second.rc == 0, second.output[-5000:]
    assert second.recap["changed"] == 0, second.output[-5000:]
    assert staged_s3.written["second"] == staged_s3.written["first"]
