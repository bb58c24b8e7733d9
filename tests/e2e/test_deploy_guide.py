"""docs/deploy.md, followed command by command on the local control plane: install, first request, upgrade,
uninstall.

Why: a deploy guide rots silently; a renamed value, a chart that no longer installs, a condition that is
never set, a wrong path in an example, and the newcomer is stuck at step 4. Every fenced block whose info
string is `sh test` runs here in the guide's order, unchanged: only the placeholders the guide documents
(REGISTRY, DIGEST, NAMESPACE, ENDPOINT) are set, as shell variables. What KWOK cannot do stands in,
outside the guide's commands: `aissim attach` serves each engine pod's rendered command line on its
pod IP (the engine), and the operator runs as a local process with the chart's ServiceAccount token and
the chart's own arguments (KWOK runs no container, so the chart's Deployment only looks Ready). ENDPOINT,
the local end of the guide's port-forward, is the engine pod's address, since KWOK nodes have no kubelet
to forward through.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import ROOT, Cluster, KubectlError, wait_for
from harness.kubeconfig import token_kubeconfig
from tests.e2e.operator_fixtures import Proc
from tests.helm.chart import find_helm, parse_manifest
from tests.helm.operator_proc import free_port, local_args, running_operator

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

GUIDE = ROOT / "docs" / "deploy.md"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
PLACEHOLDERS = ("REGISTRY", "DIGEST", "NAMESPACE", "ENDPOINT")
RELEASE, OPERATOR_NAMESPACE = "ais", "ascend-system"  # what the guide's helm install names


def guide_blocks(text: str) -> list[str]:
    """The bodies of the guide's `sh test` blocks, in order (pure)."""
    return [m.group("body") for m in FENCE.finditer(text) if m.group("info").split() == ["sh", "test"]]


def _bin_dir(cluster: Cluster, path: Path) -> Path:
    """A PATH directory with the kubectl and helm the suite runs on, under the names the guide uses."""
    path.mkdir()
    (path / "kubectl").symlink_to(cluster.kubectl_bin)
    (path / "helm").symlink_to(find_helm())
    return path


def _run(block: str, env: dict[str, str], log: Path) -> str:
    res = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    with log.open("a") as out:
        out.write(f"$ {block}\n{res.stdout}{res.stderr}(exit {res.returncode})\n\n")
    assert res.returncode == 0, f"guide block failed (exit {res.returncode}):\n{block}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def _engine_endpoint(cluster: Cluster, namespace: str) -> str:
    pod: dict[str, Any] = wait_for(
        lambda: (p := cluster.get_json("pod", "dsv4-flash-0", "-n", namespace)).get("status", {}).get("podIP") and p,
        timeout=60,
        message="the engine pod's IP",
    )
    port = pod["spec"]["containers"][0]["ports"][0]["containerPort"]
    return f"{pod['status']['podIP']}:{port}"


def _start_operator_stand_in(stack: ExitStack, cluster: Cluster, tmp_path: Path, env: dict[str, str]) -> None:
    """The operator the chart just installed, as a local process under the chart's ServiceAccount."""
    manifest = parse_manifest(
        subprocess.run(
            ["helm", "get", "manifest", RELEASE, f"--namespace={OPERATOR_NAMESPACE}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    )
    (deployment,) = (o for o in manifest if o["kind"] == "Deployment")
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    kubeconfig = token_kubeconfig(
        cluster, service_account=account, namespace=OPERATOR_NAMESPACE, path=tmp_path / "sa.kubeconfig"
    )
    health = free_port()
    args = local_args(deployment, health_port=health, metrics_port=free_port())
    stack.enter_context(
        running_operator(args, kubeconfig=kubeconfig, log=tmp_path / "operator.log", health_port=health)
    )


def json_documents(text: str) -> list[Any]:
    """The JSON values printed one after another (curl prints no newline after a body) (pure)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


def _cleanup(cluster: Cluster, namespace: str) -> None:
    """After a failure part-way: the service while the operator runs (its finalizer), then the release."""
    cluster.kubectl("delete", "ais", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False)


def test_the_guide_runs_from_install_through_first_request_to_uninstall(
    cluster: Cluster,
    simulators: Proc,
    tmp_path: Path,
) -> None:
    blocks = guide_blocks(GUIDE.read_text())
    used = {name for b in blocks for name in re.findall(r"\$\{?([A-Z][A-Z_]*)", b)}
    assert used <= set(PLACEHOLDERS), f"undocumented placeholders in sh test blocks: {used - set(PLACEHOLDERS)}"

    namespace = f"guide-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "PATH": f"{_bin_dir(cluster, tmp_path / 'bin')}:{os.environ['PATH']}",
        "KUBECONFIG": str(cluster.kubeconfig),
        "HELM_CACHE_HOME": str(tmp_path / "helm" / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm" / "config"),
        "HELM_DATA_HOME": str(tmp_path / "helm" / "data"),
        "REGISTRY": "registry.example.com/ai",
        "DIGEST": "sha256:" + "0123456789abcdef" * 4,
        "NAMESPACE": namespace,
    }
    log = tmp_path / "guide.log"
    outputs: list[str] = []
    with ExitStack() as stack:
        stack.callback(
            lambda: cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False)
        )
        stack.callback(
            lambda: subprocess.run(
                ["helm", "uninstall", RELEASE, "-n", OPERATOR_NAMESPACE], env=env, capture_output=True, check=False
            )
        )
        for block in blocks:
            if "$ENDPOINT" in block:
                env["ENDPOINT"] = _engine_endpoint(cluster, namespace)
            outputs.append(_run(block, env, log))
            if "helm install" in block:
                _start_operator_stand_in(stack, cluster, tmp_path, env)
                stack.callback(_cleanup, cluster, namespace)

    by_first = {b.split()[0] + " " + b.split()[1]: out for b, out in zip(blocks, outputs, strict=True)}
    # Step 2: the prepared node shows its eight NPUs and its architecture.
    assert re.search(r"^atlas-a2-\d+\s+8\s+arm64$", by_first["kubectl get"], re.M), by_first["kubectl get"]
    # Step 8: the engine answered the chat request with text for the served model.
    request = next(out for b, out in zip(blocks, outputs, strict=True) if "chat/completions" in b)
    models, chat = json_documents(request)
    assert models["data"][0]["id"] == "deepseek-v4-flash"
    assert chat["model"] == "deepseek-v4-flash"
    assert chat["choices"][0]["message"]["content"]
    assert 0 < chat["usage"]["completion_tokens"] <= 16
    # Step 9: the operator release was upgraded in place (CRDs applied first).
    upgrade = next(out for b, out in zip(blocks, outputs, strict=True) if "helm upgrade" in b)
    assert 'Release "ais" has been upgraded.' in upgrade
    # Step 10: the service went while the operator ran (no finalizer left behind), then the release.
    with pytest.raises(KubectlError, match="NotFound"):
        cluster.kubectl("get", "ais", "dsv4-flash", "-n", namespace)
    with pytest.raises(KubectlError, match="NotFound"):
        cluster.kubectl("get", "deployment", "ais-ascend-inference-operator", "-n", OPERATOR_NAMESPACE)
