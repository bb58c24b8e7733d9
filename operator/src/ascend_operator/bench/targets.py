"""Which URLs `aisctl bench --service NAME` measures: each engine pod of the AIS, then its Service (pure).

Why this module exists: an A/B decision about an AscendInferenceService is about its engines and about what
clients reach through its Service, and the result must say which spec was measured. Given the AIS, its pods
and its Service as the API returns them, this picks every Running pod with an IP (its engine port from the
pod's `http` container port), the Service's cluster IP, the spec hash the operator would render now and
whether every pod runs it (`inference.ascend.dev/spec-hash` annotation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.constants import ANNOTATION_SPEC_HASH


@dataclass(frozen=True)
class Url:
    label: str
    url: str
    metrics_urls: tuple[str, ...]  # where this URL's engine counters live (a Service: all of its pods)


def _pod_port(pod: Mapping[str, Any], default: int) -> int:
    for container in pod.get("spec", {}).get("containers", []):
        for port in container.get("ports") or []:
            if port.get("name") == "http":
                return int(port["containerPort"])
    return default


def service_urls(
    *, pods: Sequence[Mapping[str, Any]], service: Mapping[str, Any] | None, default_port: int
) -> list[Url]:
    ready = [p for p in pods if p.get("status", {}).get("phase") == "Running" and p.get("status", {}).get("podIP")]
    ready.sort(key=lambda p: p["metadata"]["name"])
    out = [
        Url(
            p["metadata"]["name"],
            f"http://{p['status']['podIP']}:{_pod_port(p, default_port)}",
            (f"http://{p['status']['podIP']}:{_pod_port(p, default_port)}",),
        )
        for p in ready
    ]
    cluster_ip = (service or {}).get("spec", {}).get("clusterIP")
    ports = (service or {}).get("spec", {}).get("ports") or []
    if out and cluster_ip and cluster_ip != "None" and ports:
        out.append(Url("service", f"http://{cluster_ip}:{ports[0]['port']}", tuple(u.url for u in out)))
    return out


def ais_info(*, name: str, namespace: str, spec_hash: str | None, pods: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    hashes = {p["metadata"]["name"]: p["metadata"].get("annotations", {}).get(ANNOTATION_SPEC_HASH) for p in pods}
    return {
        "name": name,
        "namespace": namespace,
        "spec_hash": spec_hash,
        "pod_spec_hashes": hashes,
        "pods_at_spec_hash": bool(hashes) and spec_hash is not None and set(hashes.values()) == {spec_hash},
    }
