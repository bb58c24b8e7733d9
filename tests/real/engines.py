"""The real engine for tests: vLLM 0.25.1 on CPU (hack/real-vllm.sh), its processes, its /metrics.

Why a plugin module: the real-engine tier (tests/real, on the cluster) and the fidelity tier (tests/fidelity,
no cluster) both start real engines and find their EngineCore and Worker processes to stop them (SIGSTOP:
the seed's hang, `/health` still 200). The root conftest.py registers it; `real_vllm` is waited for like the
Go tools (stage `vllm`), outside the per-test timeout.

Processes are found through /proc by the process group each engine runs in (aissim attach and
`start_engine` start every engine in a session of its own), and signalled by PID, never by name.
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from aissim import realengine
from aissim.attach import stop_group
from harness.cluster import build_tools, wait_for

#: At most two real engines run at once (~3.7 GB each); a start takes 45-100 s on 2 cores.
START_TIMEOUT = 300.0


@pytest.fixture(scope="session")
def real_vllm() -> str:
    """The Python of the real engine's install: $AIS_VLLM_PYTHON, else hack/real-vllm.sh's (cached)."""
    given = os.environ.get("AIS_VLLM_PYTHON")
    return given or str(build_tools("vllm"))


def get(url: str, *, key: str | None = None, timeout: float = 5.0) -> tuple[int, str]:
    """One GET; (status, body), status 0 when nothing answered."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except (OSError, TimeoutError):
        return 0, ""


def gauges(base: str, *names: str) -> dict[str, float]:
    """The summed value of each named vllm: gauge or counter on an engine's /metrics (its API server shares 2
    cores with the engine, the clients and the control plane here: a generous timeout)."""
    status, text = get(f"{base}/metrics", timeout=20.0)
    assert status == 200, f"{base}/metrics answered {status}"
    out = dict.fromkeys(names, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in out:
                out[sample.name] += sample.value
    return out


@dataclass
class Engine:
    """A real engine started by a test (not through attach): `python -m vllm...api_server` in its own group."""

    popen: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """The group goes as `aissim attach` stops a pod's engine, stopped members included."""
        stop_group(self.popen)


def start_engine(python: str, serve_args: list[str], *, host: str, port: int, log: Path, cache: Path) -> Engine:
    """Start a real engine from `serve MODEL flags...` (translated as `aissim attach --engine vllm` does)."""
    argv = realengine.command(python, serve_args, host=host, port=port, cache=cache)
    out = log.open("ab")
    env = realengine.environment(os.environ, {})
    popen = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Engine(popen=popen, host=host, port=port, log=log)


def wait_healthy(engine: Engine, *, timeout: float = START_TIMEOUT) -> float:
    """Seconds until /health answers 200; fails with the log's tail if the engine exits first."""
    t0 = time.monotonic()

    def up() -> bool:
        if engine.popen.poll() is not None:
            tail = engine.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"the real engine exited with {engine.popen.returncode}:\n{tail}")
        return get(f"{engine.base}/health", timeout=2)[0] == 200

    wait_for(up, timeout=timeout, interval=1.0, message=f"real engine {engine.base} healthy")
    return time.monotonic() - t0


@pytest.fixture
def real_engine_factory(real_vllm: str, tmp_path: Path) -> Iterator[list[Engine]]:
    """A list the test appends its started engines to; every one is stopped (by group) at teardown."""
    started: list[Engine] = []
    yield started
    for engine in started:
        engine.stop()
