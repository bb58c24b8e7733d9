"""`aissim attach` starts a simulator for exactly the pods a kubelet would run, with their own args."""

from typing import Any

from aissim.attach import target_of
from ascend_operator.api.parse import ParsedService
from ascend_operator.render.pod import Owner, build_pod


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
