"""`aissim attach` runs a router pod's vllm-router as a kubelet runs its container: the pod's own args on the
pod's IP, the pod's ServiceAccount token, stopped with the pod and started again when it exits.

Why it exists: the e2e router tests (tests/e2e/test_router.py) need a control plane; these check without one
that the router attach would start is the one the pod asks for (its rendered arguments, read back by the
0.1.17 binary's own parser, with only the listeners moved to the pod's address), that its discovery gets a
kubeconfig holding the pod's token and nothing of the harness's identity, and that the real process binds
where the pod's Service would send clients and goes away when the pod does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from kubernetes import client

from aissim.attach import sync
from aissim.pods import Target, router_target_of, target_of
from aissim.routers import Routers, find_binary, on_pod_network
from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.api.router import RouterSpec
from ascend_operator.render.pod import Owner
from ascend_operator.render.router import RouterTarget, build_router_args, build_router_deployment
from harness.cluster import wait_for
from tests.sim.conftest import loopback

REPO = Path(__file__).resolve().parents[2]
OWNER = Owner(name="svc", namespace="llm", uid="uid-1")
SPEC = RouterSpec.model_validate({"image": "docker.io/vllm/vllm-router:v0.1.17"})
TARGET = RouterTarget(
    owner=OWNER, engine_port=8000, engine_selector={LABEL_SERVICE: "svc"}, engine_replicas=2, max_num_seqs=4
)


@pytest.fixture(scope="module")
def router_bin() -> Path:
    """vllm-router 0.1.17 as hack/vllm-router.sh installs it (cached outside the repo; seconds when warm)."""
    out = subprocess.run(["bash", str(REPO / "hack" / "vllm-router.sh")], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip().splitlines()[-1])


def router_pod(ip: str = "127.10.0.9", **spec: Any) -> dict[str, Any]:
    """A pod of the rendered router Deployment as the API server returns it once it runs."""
    template = build_router_deployment(SPEC, TARGET)["spec"]["template"]
    return {
        "metadata": {**template["metadata"], "name": "svc-router-abc", "namespace": "llm", "uid": "r-1"},
        "spec": {**template["spec"], **spec},
        "status": {"phase": "Running", "podIP": ip},
    }


def test_a_router_pod_gets_its_rendered_args_and_its_service_account() -> None:
    target = router_target_of(router_pod())
    assert target is not None
    assert list(target.args) == build_router_args(SPEC, TARGET)
    assert (target.ip, target.port, target.service_account) == ("127.10.0.9", 30000, "svc-router")
    assert target_of(router_pod()) is None  # a router pod needs no engine
    opted_out = router_target_of(router_pod(automountServiceAccountToken=False))
    assert opted_out is not None
    assert opted_out.service_account is None
    assert router_target_of({**router_pod(), "status": {"phase": "Pending"}}) is None


PARSE = """
import dataclasses, json, sys
from vllm_router.launch_router import parse_router_args
print(json.dumps(dataclasses.asdict(parse_router_args(json.loads(sys.argv[1]))), default=str))
"""


def test_only_the_listeners_move_to_the_pod_ip(router_bin: Path) -> None:
    rendered = build_router_args(SPEC, TARGET)
    moved = on_pod_network(rendered, "127.10.0.9")

    def parse(args: list[str]) -> dict[str, Any]:
        python = router_bin.parent / "python"
        out = subprocess.run([str(python), "-c", PARSE, json.dumps(args)], capture_output=True, text=True, check=True)
        parsed: dict[str, Any] = json.loads(out.stdout)
        return parsed

    before, after = parse(rendered), parse(moved)
    assert (after["host"], after["prometheus_host"]) == ("127.10.0.9", "127.10.0.9")
    assert {k: v for k, v in after.items() if k not in ("host", "prometheus_host")} == {
        k: v for k, v in before.items() if k not in ("host", "prometheus_host")
    }
    # a pod that leaves them to the router's 127.0.0.1 default still gets its own address
    assert on_pod_network(["--port", "30000"], "127.10.0.9") == [
        "--port", "30000", "--host", "127.10.0.9", "--prometheus-host", "127.10.0.9",
    ]  # fmt: skip


def test_the_binary_is_the_flag_then_the_env_then_the_finished_cached_install(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert find_binary(None, env) is None  # nothing installed: attach runs engines and says why not routers
    venv = tmp_path / "ascend-operator" / "vllm-router-0.1.17"
    (venv / "bin").mkdir(parents=True)
    assert find_binary(None, env) is None  # an install without its stamp is not finished
    (venv / ".done").touch()
    assert find_binary(None, env) == venv / "bin" / "vllm-router"
    assert find_binary(None, {**env, "AIS_VLLM_ROUTER": "/x/vllm-router"}) == Path("/x/vllm-router")
    assert find_binary("/y/vllm-router", {**env, "AIS_VLLM_ROUTER": "/x/vllm-router"}) == Path("/y/vllm-router")


class TokenRequests:
    """The one API call the launcher makes (a TokenRequest), recorded; no API server needed."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, Any]] = []

    def create_namespaced_service_account_token(self, name: str, namespace: str, body: Any) -> Any:
        self.asked.append((name, namespace, body))
        return SimpleNamespace(status=SimpleNamespace(token=f"token-{len(self.asked)}"))


def api_client(tmp_path: Path) -> client.ApiClient:
    conf = client.Configuration()
    conf.host = "https://127.0.0.1:1"  # nothing listens: the router's watcher retries, its server serves
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    conf.ssl_ca_cert = str(ca)
    return client.ApiClient(conf)


def test_the_router_gets_the_pods_token_in_its_kubeconfig_and_not_the_harness_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, router_bin: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/harness/admin.yaml")
    routers = Routers(router_bin, log_dir=None)
    core = TokenRequests()
    target = router_target_of(router_pod())
    assert target is not None
    argv, env = routers.launcher(core, api_client(tmp_path))(target, {})  # type: ignore[arg-type]
    assert argv[0] == str(router_bin)
    assert env["KUBECONFIG"] != "/harness/admin.yaml"
    ((name, namespace, request),) = core.asked
    assert (name, namespace) == ("svc-router", "llm")
    ref = request.spec.bound_object_ref
    assert (ref.kind, ref.name, ref.uid) == ("Pod", "svc-router-abc", "r-1")  # bound to the pod, as the kubelet's
    conf = yaml.safe_load(Path(env["KUBECONFIG"]).read_text())
    assert conf["users"][0]["user"] == {"token": "token-1"}
    assert conf["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1"
    assert "certificate-authority-data" in conf["clusters"][0]["cluster"]
    assert Path(env["KUBECONFIG"]).stat().st_mode & 0o077 == 0
    routers.close()
    assert not routers.workdir.exists()
    # no token mounted: no kubeconfig either (the router's discovery fails as it would in the pod)
    opted_out = router_target_of(router_pod(automountServiceAccountToken=False))
    assert opted_out is not None
    _, env = Routers(router_bin, log_dir=None).launcher(core, api_client(tmp_path))(opted_out, {})  # type: ignore[arg-type]
    assert "KUBECONFIG" not in env


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_the_real_router_serves_on_the_pod_ip_restarts_when_it_exits_and_stops_with_its_pod(
    tmp_path: Path, router_bin: Path
) -> None:
    ip = loopback()
    target = router_target_of(router_pod(ip))
    assert target is not None
    routers = Routers(router_bin, log_dir=tmp_path)
    launch = routers.launcher(TokenRequests(), api_client(tmp_path))  # type: ignore[arg-type]

    def step(targets: list[Target]) -> None:
        sync(routers.running, targets, now=time.monotonic(), log_dir=tmp_path, launcher=launch)

    try:
        step([target])
        first = routers.running.children[target.uid].process.pid
        wait_for(lambda: answers(f"http://{ip}:30000/liveness"), timeout=60, message="the router serving")
        assert answers(f"http://{ip}:29000/metrics")  # Prometheus on the pod's address too
        os.kill(first, signal.SIGKILL)  # the process dies: started again after the back-off, as a container

        def restarted() -> bool:
            step([target])
            child = routers.running.children.get(target.uid)
            return child is not None and child.process.pid != first and answers(f"http://{ip}:30000/liveness")

        wait_for(restarted, timeout=60, message="the router started again")
        second = routers.running.children[target.uid].process.pid
        step([])  # the pod is gone: SIGTERM to its PID, reaped within the grace

        def stopped() -> bool:
            step([])
            return not routers.running.stopping

        wait_for(stopped, timeout=30, message="the router stopped")
        assert not alive(second)
        assert not answers(f"http://{ip}:30000/liveness")
    finally:
        routers.close()
