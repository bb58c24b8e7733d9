"""`aissim attach` for the routers of `spec.router`: the real vllm-router 0.1.17 for each running router pod,
as a kubelet would run the pod's `router` container.

Why the real router and not a model of it: what `spec.router` promises (requests reach only the engines the
operator judged Ready, a hung engine gets no new request once its gate falls, the admission budget queues
and refuses as docs/router.md says) is the router's behaviour, so the local tier runs the binary the
operator renders arguments for (hack/vllm-router.sh installs it once, cached).

What the kubelet would give the container, and how each is played here:

- the pod's network: every listener on the pod's 127.x IP. `--host` and `--prometheus-host` (rendered as
  0.0.0.0) become the pod IP, and are added if the pod does not set them (the router would bind 127.0.0.1,
  where two router pods would collide on one port);
- the ServiceAccount token: a TokenRequest for the pod's ServiceAccount, bound to the pod as the kubelet's
  projected token is, written with the API server's address and CA into a kubeconfig the router finds
  through KUBECONFIG (kube-rs `Client::try_default` reads it before the in-cluster files). The router's
  discovery therefore runs with exactly the rights the operator's Role grants, not the harness's. No
  token (`automountServiceAccountToken: false`) means no kubeconfig, and the router fails as in a pod;
- the pod's Secret env (`OPENAI_API_KEY` for P/D) through pods.py's secretKeyRef reading.

Not played: the readiness and liveness probes. KWOK marks a probed container ready at once
(hack/kwok/pod-stages.yaml), so a router pod is Ready before its router has an engine; a client that
needs it serving waits on the router's `/readiness`.

Supervision is attach.py's (`sync`: started with the pod, SIGTERM to its PID when the pod goes, the group
killed after the grace, restarted after a back-off when it exits) over a registry of its own.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubernetes import client

from aissim.attach import Engines, Launcher, sync
from aissim.pods import API_UNREACHABLE, Target, list_router_targets, secret_reader

log = logging.getLogger("aissim.routers")

#: The version spec.router's arguments are checked against (hack/vllm-router.sh, tests/render/test_render_router.py).
ROUTER_VERSION = "0.1.17"
#: The router's own variable for its binary, as AIS_VLLM_PYTHON is the real engine's.
BINARY_ENV = "AIS_VLLM_ROUTER"
#: Seconds a pod's token is asked for (a kubelet refreshes its projected token; a router that exits is
#: started again with a fresh one).
TOKEN_SECONDS = 86400


def cached_binary(env: Mapping[str, str]) -> Path:
    """Where hack/vllm-router.sh installs the router: ${XDG_CACHE_HOME:-~/.cache}/ascend-operator/vllm-router-<v>."""
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ascend-operator" / f"vllm-router-{ROUTER_VERSION}" / "bin" / "vllm-router"


def find_binary(given: str | None, env: Mapping[str, str]) -> Path | None:
    """The router binary: `given` (--router-bin), else $AIS_VLLM_ROUTER, else hack/vllm-router.sh's cached
    install once it is complete (its `.done` stamp); None when there is none (attach does not install)."""
    chosen = given or env.get(BINARY_ENV)
    if chosen:
        return Path(chosen)
    cached = cached_binary(env)
    return cached if (cached.parents[1] / ".done").is_file() else None


def on_pod_network(args: Sequence[str], ip: str) -> list[str]:
    """The pod's router args with every listener on the pod's IP: `--host` and `--prometheus-host` replaced,
    or added when the pod leaves them to the router's 127.0.0.1 default."""
    out = list(args)
    for flag in ("--host", "--prometheus-host"):
        if flag in out and out.index(flag) + 1 < len(out):
            out[out.index(flag) + 1] = ip
        else:
            out += [flag, ip]
    return out


def kubeconfig(server: str, ca_pem: bytes | None, token: str) -> dict[str, object]:
    """A kubeconfig for one token (what a pod's projected token and the in-cluster CA amount to)."""
    cluster: dict[str, object] = {"server": server}
    if ca_pem is None:
        cluster["insecure-skip-tls-verify"] = True
    else:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "pod", "user": {"token": token}}],
        "contexts": [{"name": "pod", "context": {"cluster": "local", "user": "pod"}}],
        "current-context": "pod",
    }


def pod_token(core: client.CoreV1Api, target: Target) -> str:
    """A token of the pod's ServiceAccount bound to the pod, as the kubelet requests for its projected volume."""
    assert target.service_account is not None
    ref = client.V1BoundObjectReference(api_version="v1", kind="Pod", name=target.name, uid=target.uid)
    spec = client.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS, bound_object_ref=ref)
    made = core.create_namespaced_service_account_token(
        target.service_account, target.namespace, client.AuthenticationV1TokenRequest(spec=spec)
    )
    if made.status is None:  # the API server always answers a TokenRequest with its status
        raise client.ApiException(reason=f"no token in the TokenRequest answer for {target.namespace}/{target.name}")
    return str(made.status.token)


class Routers:
    """The router processes of the router pods attach sees, by pod UID."""

    def __init__(self, binary: Path | None, *, log_dir: Path | None) -> None:
        self.binary = binary
        self.log_dir = log_dir
        self.running = Engines()
        self.workdir = Path(tempfile.mkdtemp(prefix="aissim-routers-"))

    def launcher(self, core: client.CoreV1Api, api: client.ApiClient) -> Launcher:
        """`vllm-router <pod args on the pod network>` with KUBECONFIG holding the pod's token."""
        conf = api.configuration

        def launch(target: Target, secret_env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
            if self.binary is None or not self.binary.is_file():
                raise ValueError(
                    f"no vllm-router at {self.binary or cached_binary(os.environ)}: run `bash hack/vllm-router.sh` "
                    f"(it installs {ROUTER_VERSION} and prints the path) or pass --router-bin / ${BINARY_ENV}"
                )
            env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
            if target.service_account is not None:
                ca = Path(conf.ssl_ca_cert).read_bytes() if conf.verify_ssl and conf.ssl_ca_cert else None
                path = self.workdir / f"{target.uid}.kubeconfig"
                path.touch(mode=0o600)
                path.write_text(json.dumps(kubeconfig(conf.host, ca, pod_token(core, target))))
                env["KUBECONFIG"] = str(path)
            return [str(self.binary), *on_pod_network(target.args, target.ip)], {**env, **secret_env}

        return launch

    def poll(self, core: client.CoreV1Api, api: client.ApiClient, namespace: str | None) -> bool:
        """One listing of the router pods and sync of their routers; False (logged) when the API is unreachable."""
        try:
            targets = list_router_targets(core, api, namespace)
            sync(
                self.running, targets, now=time.monotonic(), log_dir=self.log_dir,
                secrets=secret_reader(core), launcher=self.launcher(core, api),
            )  # fmt: skip
        except API_UNREACHABLE as exc:
            log.warning("listing router pods failed: %s", exc)
            return False
        return True

    def close(self) -> None:
        """Stop every router (SIGTERM to each PID, the group killed after the grace) and drop the tokens."""
        self.running.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
