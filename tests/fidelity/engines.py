"""The fidelity tier's engines: a real vLLM 0.25.1 (CPU, tiny model) and an `aissim serve`, started together
from the same rendered pod args, as scenario Targets; stopped by PID/process group.

Why a module: test_fidelity.py starts one pair for its scenario and a second pair with
`--long-prefill-token-threshold` for the prefill-share test, the same way (a startup flag, so the one
difference between the pairs is that flag).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from aissim import realengine
from ascend_operator.api.parse import parse_resource
from ascend_operator.render.args import build_engine_args
from harness.cluster import wait_for
from harness.engines import group_members, process
from tests.fidelity import scenario as sc
from tests.real.engines import Engine, get, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
Address = tuple[str, int]


def serve_args(**engine_fields: Any) -> list[str]:
    """The production example as the operator renders it (`serve MODEL ...`), without DSpark (the CPU
    engine has no draft head) and without its long-prefill threshold, with 4 sequences and 256-token batches
    (a long prompt prefills in chunks), and any further spec.engine fields given."""
    body = yaml.safe_load(EXAMPLE.read_text())
    engine = body["spec"]["engine"]
    engine.pop("speculative")
    engine.pop("longPrefillTokenThreshold", None)  # the threshold test sets it on its own pair only
    engine["maxNumSeqs"] = 4
    engine["maxNumBatchedTokens"] = 256
    engine.update(engine_fields)
    return build_engine_args(parse_resource(body).spec)


def _start_real(python: str, args: list[str], tmp: Path, at: Address) -> Engine:
    """The real engine as `tests.real.engines.start_engine` starts it, plus the pod's Secret (the API key)."""
    host, port = at
    argv = realengine.command(python, args, host=host, port=port, cache=tmp / "models")
    log = tmp / "vllm.log"
    env = realengine.environment(os.environ, {"VLLM_API_KEY": sc.KEY})
    popen = subprocess.Popen(argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
    return Engine(popen=popen, host=host, port=port, log=log)


def _start_sim(args: list[str], tmp: Path, at: Address) -> subprocess.Popen[bytes]:
    host, port = at
    env = {**os.environ, "AIS_SIM_BIND_HOST": host, "AIS_SIM_BIND_PORT": str(port), "VLLM_API_KEY": sc.KEY}
    argv = [sys.executable, "-m", "aissim", *args, "--sim-time-scale", "1"]
    log = (tmp / "aissim.log").open("ab")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop_sim(popen: subprocess.Popen[bytes]) -> None:
    if popen.poll() is None:
        popen.terminate()
    try:
        popen.wait(timeout=15)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


def _sim_fault(base: str, method: str, body: dict[str, Any] | None = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + "/sim/faults", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200, resp.read()


def _state(pgid: int, log: Path, *, lines: int = 30) -> str:
    """Each process of the engine's group with its scheduler state (R running, S sleeping, T stopped), the
    host's load average, and the last lines of the engine's log."""
    procs = []
    for pid, cmd in group_members(pgid).items():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            state = "?"
        procs.append(f"{pid} {state} {cmd[:60]!r}")
    tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else ["(no log)"]
    load = Path("/proc/loadavg").read_text().strip()
    return "\n".join([f"processes: {'; '.join(procs) or 'none'}", f"load average: {load}", f"{log.name}:", *tail])


@contextlib.contextmanager
def pair(python: str, args: list[str], tmp: Path, *, real_at: Address, sim_at: Address) -> Iterator[list[sc.Target]]:
    """The real engine and the simulator, started together from the same args, as [vllm, aissim]."""
    t0 = time.monotonic()
    real = _start_real(python, args, tmp, real_at)
    sim = _start_sim(args, tmp, sim_at)
    core: int | None = None
    try:
        sim_base = f"http://{sim_at[0]}:{sim_at[1]}"
        wait_for(lambda: sim.poll() is None and get(f"{sim_base}/health")[0] == 200, timeout=60, interval=0.2,
                 message="aissim healthy")  # fmt: skip
        real_ready = wait_healthy(real)
        print(f"\n[fidelity] real engine healthy after {real_ready:.0f}s; both up after {time.monotonic() - t0:.0f}s")
        core = process(real.popen.pid, "VLLM::EngineCore")
        pid = core
        yield [
            sc.Target(
                "vllm",
                real.base,
                lambda: os.kill(pid, signal.SIGSTOP),
                lambda: os.kill(pid, signal.SIGCONT),
                terminate=lambda: real.popen.send_signal(signal.SIGTERM),
                running=lambda: real.popen.poll() is None,
                outlast=6,
                state=lambda: _state(real.popen.pid, real.log),
            ),
            sc.Target(
                "aissim",
                sim_base,
                lambda: _sim_fault(sim_base, "POST", {"fault": "hang"}),
                lambda: _sim_fault(sim_base, "DELETE"),
                terminate=lambda: sim.send_signal(signal.SIGTERM),
                running=lambda: sim.poll() is None,
                state=lambda: _state(sim.pid, tmp / "aissim.log"),
            ),
        ]
    finally:
        if core is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(core, signal.SIGCONT)  # a stopped EngineCore would sit out the SIGTERM
        real.stop()
        _stop_sim(sim)
