"""`aissim attach` starts a simulator for exactly the pods a kubelet would run, with their own args."""

import copy
import subprocess
from pathlib import Path
from typing import Any, cast

import kubernetes.client
import urllib3
import yaml

from aissim.attach import Child, Engines, poll
from aissim.pods import Target, target_of
from ascend_operator.api.parse import ParsedService, parse_resource
from ascend_operator.render.lws import build_leader_worker_set
from ascend_operator.render.pod import Owner, build_pod

ROOT = Path(__file__).resolve().parents[2]


def running(pod: dict[str, Any], ip: str = "127.10.0.7") -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "uid": "u-1"}, "status": {"phase": "Running", "podIP": ip}}


def test_running_pod_gets_its_rendered_args_on_its_ip(example: ParsedService) -> None:
    pod = build_pod(example.spec, owner=Owner(name="dsv4-flash", namespace="llm"), replica=0)
    target = target_of(running(pod))
    assert target is not None
    assert (target.ip, target.port, target.name) == ("127.10.0.7", 8000, "dsv4-flash-0")
    # The pod's args are `vllm serve ...` (no command: the image's ENTRYPOINT stays); aissim takes `serve ...`.
    assert ["vllm", *target.args] == pod["spec"]["containers"][0]["args"]
    assert target.args[0] == "serve"


def test_pending_terminating_or_unaddressed_pods_get_none(example: ParsedService) -> None:
    pod = build_pod(example.spec, owner=Owner(name="dsv4-flash", namespace="llm"), replica=0)
    assert target_of(pod) is None
    assert target_of(running(pod, ip="")) is None
    gone = running(pod)
    gone["metadata"]["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    assert target_of(gone) is None


def _group_pod(role: str, name: str, worker_index: str) -> dict[str, Any]:
    """A pod as LWS creates it from the two-node example's template: the webhook adds the LWS env."""
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "dsr1-2node.yaml").read_text())
    lws = build_leader_worker_set(parse_resource(body).spec, owner=Owner(name="dsr1", namespace="llm"))
    template = lws["spec"]["leaderWorkerTemplate"][f"{role}Template"]
    spec = copy.deepcopy(template["spec"])
    spec["containers"][0]["env"] += [
        {"name": "LWS_LEADER_ADDRESS", "value": "dsr1-group-0.dsr1-group.llm"},
        {"name": "LWS_WORKER_INDEX", "value": worker_index},
    ]
    return {"metadata": {"name": name, "namespace": "llm"}, "spec": spec}


def test_group_pods_get_the_leader_ip_for_the_lws_leader_address() -> None:
    leader = running(_group_pod("leader", "dsr1-group-0", "0"), ip="127.10.0.1")
    worker = running(_group_pod("worker", "dsr1-group-0-1", "1"), ip="127.10.1.1")
    assert target_of(worker, {}) is None  # the leader has no IP yet: nothing to join
    ips = {("llm", "dsr1-group-0"): "127.10.0.1", ("llm", "dsr1-group-0-1"): "127.10.1.1"}
    for pod in (leader, worker):
        target = target_of(pod, ips)
        assert target is not None
        args = list(target.args)
        assert args[args.index("--data-parallel-address") + 1] == "127.10.0.1"
    worker_target = target_of(worker, ips)
    assert worker_target is not None
    assert "--headless" in worker_target.args


def test_secret_env_is_recorded_by_reference_and_resolved_like_the_kubelet(example: ParsedService) -> None:
    from aissim.pods import Target
    from ascend_operator.api.parse import parse_spec

    body = example.spec.model_dump(by_alias=True, exclude_none=True)
    spec = parse_spec({**body, "auth": {"apiKeySecretRef": {"name": "engine-key", "key": "token"}}})
    target = target_of(running(build_pod(spec, owner=Owner(name="dsv4-flash", namespace="llm"), replica=0)))
    assert target is not None
    assert target.secret_env == (("VLLM_API_KEY", "engine-key", "token"),)
    assert "secret" not in " ".join(target.args)

    class Core:
        def read_namespaced_secret(self, name: str, namespace: str) -> Any:
            assert (name, namespace) == ("engine-key", "llm")
            return type("Secret", (), {"data": {"token": "czNjcmV0"}})()  # base64 of "s3cret"

    from aissim.pods import secret_reader

    assert secret_reader(Core())(target) == {"VLLM_API_KEY": "s3cret"}  # type: ignore[arg-type]
    assert isinstance(target, Target)


class UnreachableCore:
    """A CoreV1Api whose listing fails as the kubernetes client fails while kube-apiserver is down."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        raise self.error


def test_an_unreachable_api_server_keeps_attach_and_its_engines_running() -> None:
    refused = urllib3.exceptions.MaxRetryError(
        urllib3.HTTPSConnectionPool("127.0.0.1", 6443),
        "/api/v1/namespaces/llm/pods",
        urllib3.exceptions.NewConnectionError(urllib3.connection.HTTPSConnection("127.0.0.1", 6443), "refused"),
    )
    process = subprocess.Popen(["sleep", "30"])
    try:
        target = Target(uid="u-1", name="svc-0", namespace="llm", ip="127.10.0.7", args=("serve",), port=8000)
        engines = Engines(children={"u-1": Child(target=target, process=process)})
        for error in (refused, kubernetes.client.ApiException(status=429, reason="storage is (re)initializing")):
            core = cast(kubernetes.client.CoreV1Api, UnreachableCore(error))
            assert poll(engines, core, kubernetes.client.ApiClient(), "llm", log_dir=None) is False
        assert list(engines.children) == ["u-1"]
        assert process.poll() is None  # the engine was not stopped
    finally:
        process.kill()
        process.wait()


def test_a_gone_pods_engine_group_goes_whole_even_a_stopped_member(tmp_path: Path) -> None:
    """A real engine is three processes (API server, EngineCore, Worker); a test or a fault may have stopped
    one. When its pod goes, attach must leave none of them behind, and must not wait for them to go."""
    import os
    import signal
    import time

    from aissim.attach import sync

    def launcher(target: Target, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        # the leader leaves on SIGTERM only once the test lets it, so the first sync sees it still stopping
        leave = f"trap 'until [ -e {tmp_path}/leave ]; do sleep 0.05; done; exit 0' TERM"
        script = f"{leave}; sleep 60 & echo $! > {tmp_path}/member; wait"
        return ["bash", "-c", script], dict(os.environ)

    target = Target(uid="u-1", name="svc-0", namespace="llm", ip="127.10.0.7", args=("serve",), port=8000)
    engines = Engines()
    sync(engines, [target], now=0.0, log_dir=None, launcher=launcher)
    leader = engines.children["u-1"].process
    member_file = tmp_path / "member"
    deadline = time.monotonic() + 10
    while not member_file.exists() or not member_file.read_text().strip():
        assert time.monotonic() < deadline, "the engine's member never started"
        time.sleep(0.05)
    member = int(member_file.read_text())
    assert os.getpgid(member) == leader.pid  # the engine runs in a group of its own
    os.kill(member, signal.SIGSTOP)
    sync(engines, [], now=1.0, log_dir=None, launcher=launcher)  # the pod is gone: SIGTERM, no wait
    assert not engines.children
    assert len(engines.stopping) == 1
    (tmp_path / "leave").touch()
    leader.wait(timeout=10)
    sync(engines, [], now=2.0, log_dir=None, launcher=launcher)  # leader gone: the group is killed, reaped
    assert not engines.stopping

    def gone(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        return state == "Z"  # a zombie waiting for init: no longer runs

    deadline = time.monotonic() + 10
    while not gone(member):
        assert time.monotonic() < deadline, "the stopped member outlived its pod"
        time.sleep(0.05)
