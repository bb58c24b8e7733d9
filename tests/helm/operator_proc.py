"""The operator run as a local process under a ServiceAccount token, the way the chart's Deployment runs it.

Why it exists: there is no container runtime here, so the chart's pod cannot run; but RBAC is about the
identity, not the process. A TokenRequest token for the chart's ServiceAccount in a kubeconfig, and the
exact arguments of the Deployment the chart installed, reproduce what the in-cluster operator can and
cannot do. The process is always stopped by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.cluster import wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local_args(deployment: dict[str, Any], *, health_port: int, metrics_port: int) -> list[str]:
    """The Deployment's operator args with the listeners moved to free local ports (nothing else changed)."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args: list[str] = []
    for arg in container["args"]:
        if arg.startswith("--liveness="):
            arg = f"--liveness=http://127.0.0.1:{health_port}/healthz"
        elif arg.startswith("--metrics-port="):
            arg = f"--metrics-port={metrics_port}"
        args.append(arg)
    return args


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        body: bytes = resp.read()
        return body.decode()


@contextmanager
def running_operator(args: Sequence[str], *, kubeconfig: Path, log: Path, health_port: int) -> Iterator[int]:
    """Run `aisctl <args>` with only `kubeconfig`'s identity until the block ends; yields the PID."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_SERVICE_")}  # never in-cluster
    env["KUBECONFIG"] = str(kubeconfig)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ascend_operator.cli.main", *args], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(
            lambda: proc.poll() is None and get(f"http://127.0.0.1:{health_port}/healthz") is not None,
            timeout=60,
            message=f"operator liveness endpoint (log: {log})",
        )
        yield proc.pid
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # kopf stops its daemons gracefully on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
