#!/usr/bin/env python3
"""`make demo`: the operator doing what it exists for, locally, with no NPU and no Docker.

1. build (or reuse) the control plane and start it with one fake Atlas 800 A2 node;
2. install the CRDs and RBAC from the Helm chart and run the operator with its ServiceAccount's token;
3. apply examples/dsv4-flash.yaml unchanged except the image (the simulator stands in for the engine);
4. run the engine simulator for the pod on its 127.x IP with the pod's rendered args (`aissim attach`);
5. show `kubectl get ais` going from Progressing to Ready with live tokens/s and KV usage under load;
6. inject the seed's long-context stall (KV past 97.5%, no forward progress, /health still 200): the
   detector's finding, the roll and its reason, Ready again;
7. print a timeline and stop every process it started (`--keep` leaves everything running and prints the one
   command that stops all of it: `hack/local-cluster down DIR`, which stops the processes the demo recorded
   in DIR/attached/ by process group (the operator, `aissim attach` and its engines), then the control plane).

With `--engine vllm` (`make demo DEMO_ARGS="--engine vllm"`) the engine is the real one: vLLM 0.25.1 on CPU
(hack/real-vllm.sh installs it, cached) with a tiny model and the pod's own args (aissim/realengine.py's
table), the example without DSpark (the CPU engine has no draft head), byte-level prompts instead of the
simulator's `sim_prompt_tokens`, and the seed's hang as it happens on a real engine: the EngineCore process
stopped (SIGSTOP), `/health` still 200, a completion hanging, until the stall detector rolls the pod.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "hack" / "lib"))

from cluster_procs import record  # noqa: E402

from harness.cluster import Cluster, build_tools, existing_cluster, pid_running, start_local, wait_for  # noqa: E402
from harness.engines import engine_group, process  # noqa: E402
from harness.kubeconfig import token_kubeconfig  # noqa: E402

NAMESPACE = "ascend-demo"
NAME = "dsv4-flash"
SIM_IMAGE = "aissim:dev"  # simulator/Dockerfile's image: its `vllm` is the simulator
CHART = ROOT / "charts" / "ascend-inference-operator"
RELEASE = "ascend-operator"
SYSTEM_NAMESPACE = "ascend-system"


class Demo:
    """Steps with a timeline."""

    def __init__(self, *, workdir: Path) -> None:
        self.start = time.monotonic()
        self.timeline: list[tuple[float, str]] = []
        self.workdir = workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.pids: list[int] = []
        """Every process the demo started (its own and the control plane's), for the timeline file."""
        self.roll: dict[str, Any] | None = None
        self.record_dir = workdir
        """Where spawned processes are recorded for `hack/local-cluster down` (the cluster's state dir when the
        demo started the cluster, so one command stops both)."""
        self.processes: dict[str, int] = {}

    def step(self, text: str) -> None:
        elapsed = time.monotonic() - self.start
        self.timeline.append((elapsed, text))
        print(f"[{elapsed:6.1f}s] {text}", flush=True)

    def spawn(self, name: str, args: list[str], env: dict[str, str], *, program: str = "ascend_operator.cli.main"
              ) -> subprocess.Popen[bytes]:  # fmt: skip
        log = (self.workdir / f"{name}.log").open("ab")
        # A session of its own: `hack/local-cluster down` signals the whole group, and the terminal's Ctrl-C
        # reaches the demo only, which then stops everything itself.
        proc = subprocess.Popen(
            [sys.executable, "-m", program, *args], env={**os.environ, **env}, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        record(self.record_dir, name, proc.pid, sys.executable)
        self.procs.append(proc)
        self.pids.append(proc.pid)
        self.processes[name] = proc.pid
        return proc

    def stop_command(self) -> list[str]:
        """The one command that stops what the demo started: `hack/local-cluster down DIR`."""
        script = ROOT / "hack" / "local-cluster"
        shown = os.path.relpath(script) if script.is_relative_to(Path.cwd()) else str(script)
        return [shown, "down", str(self.record_dir)]

    def stop(self) -> None:
        """Run the stop command, then reap the demo's own children."""
        try:
            subprocess.run(self.stop_command(), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        finally:
            self.stop_all()

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def ais(cluster: Cluster) -> dict[str, Any]:
    result: dict[str, Any] = cluster.get_json("ais", NAME, "-n", NAMESPACE)
    return result


def ready_reason(body: dict[str, Any]) -> str:
    conds = (body.get("status") or {}).get("conditions") or []
    return next((f"{c['status']}/{c['reason']}" for c in conds if c["type"] == "Ready"), "-")


def engine_pod(cluster: Cluster) -> dict[str, Any] | None:
    items = cluster.get_json("pods", "-n", NAMESPACE, "-l", f"inference.ascend.dev/service={NAME}")["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP")]
    return live[0] if live else None


def install(cluster: Cluster, bindir: Path) -> str:
    """CRDs, ServiceAccount and RBAC through the chart (replicaCount=0: the operator runs here)."""
    helm = bindir / "helm"
    subprocess.run(
        [str(helm), "upgrade", "--install", RELEASE, str(CHART), "--namespace", SYSTEM_NAMESPACE,
         "--create-namespace", "--kubeconfig", str(cluster.kubeconfig), "--set", "replicaCount=0",
         "--wait", "--timeout", "120s"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return "the Helm chart: CRDs, ServiceAccount, least-privilege RBAC"


def prompt_body(i: int, done: int, *, real: bool) -> dict[str, Any]:
    """A 1K-token prompt: the simulator's `sim_prompt_tokens`, or 1024 characters (the tiny model's tokenizer
    counts one token per byte)."""
    if real:
        return {"prompt": "".join(random.choices(string.ascii_letters, k=1024))}
    return {"prompt": f"demo {i} {done}", "sim_prompt_tokens": 1024}


async def load(base: str, model: str, *, seconds: float, concurrency: int, real: bool) -> int:
    """A short closed-loop load: `concurrency` clients sending 1K-token prompts for 128 tokens."""
    done = 0
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session:

        async def client(i: int) -> None:
            nonlocal done
            while time.monotonic() < deadline:
                body = {"model": model, **prompt_body(i, done, real=real), "max_tokens": 128, "ignore_eos": True}
                async with session.post(f"{base}/v1/completions", json=body) as resp:
                    await resp.read()
                done += 1

        await asyncio.gather(*(client(i) for i in range(concurrency)))
    return done


async def stall(base: str, model: str) -> None:
    """The seed's long-context failure: forward progress stops once KV passes 97.5% (its 512K run went
    0.6% -> 83.7% -> 90.8% -> 97.5%). The example admits 327680 tokens, so two 300K conversations that
    are resident together (the first still generating while the second prefills) fill the KV pool the way
    one 512K request did."""
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/sim/faults", json={"fault": "stall-at-kv", "threshold": 0.975}) as resp:
            resp.raise_for_status()

        async def long_request(i: int) -> None:
            await asyncio.sleep(0.5 * i)
            body = {"model": model, "prompt": f"long context {i}", "sim_prompt_tokens": 300_000,
                    "max_tokens": 20_000, "ignore_eos": True}  # fmt: skip
            try:
                async with session.post(f"{base}/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=600)):
                    pass
            except (aiohttp.ClientError, TimeoutError):
                pass  # the engine is recreated under it

        await asyncio.gather(long_request(0), long_request(1))


async def hang_engine_core(pod: dict[str, Any], base: str, model: str) -> None:
    """The seed's failure on the real engine: requests running, then the EngineCore process stops (SIGSTOP,
    by PID); the API server still answers /health 200 and the requests hang until the pod is rolled."""
    ip = pod["status"]["podIP"]
    pgid = engine_group(ip, 8000)
    assert pgid is not None, f"no real engine on {ip}:8000"
    core = process(pgid, "VLLM::EngineCore")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def one(i: int) -> None:
            body = {"model": model, **prompt_body(i, 0, real=True), "max_tokens": 4000, "ignore_eos": True}
            try:
                async with session.post(f"{base}/v1/completions", json=body) as resp:
                    await resp.read()
            except (aiohttp.ClientError, TimeoutError):
                pass  # the engine is recreated under it

        tasks = [asyncio.create_task(one(i)) for i in range(4)]
        await asyncio.sleep(3)
        os.kill(core, signal.SIGSTOP)
        async with session.get(f"{base}/health") as resp:
            print(f"         EngineCore (pid {core}) stopped; /health answers {resp.status}", flush=True)
        await asyncio.gather(*tasks)


def show(cluster: Cluster) -> None:
    print(
        "         " + cluster.kubectl("get", "ais", "-n", NAMESPACE).replace("\n", "\n         ").rstrip(), flush=True
    )


def run(args: argparse.Namespace, demo: Demo) -> int:
    demo.step("building or reusing the control plane (etcd, kube-apiserver, scheduler, controller-manager, KWOK)")
    bindir = build_tools()
    if args.kubeconfig:
        cluster = existing_cluster(Path(args.kubeconfig))
    else:
        cluster = start_local(demo.workdir / "cluster", nodes=1)
        demo.pids += list(cluster.pids().values())
        assert cluster.state_dir is not None
        demo.record_dir = cluster.state_dir
    demo.step(f"control plane up; nodes: {', '.join(cluster.node_names())}")
    try:
        return scenario(args, demo, cluster, bindir)
    finally:
        if not args.keep:
            try:
                cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s", check=False)
            finally:
                demo.stop()
                left = [pid for pid in demo.pids if pid_running(pid)]
                demo.step("stopped every process" + (f" except {left}" if left else ""))
        else:
            demo.step(f"kept running; use: export KUBECONFIG={cluster.kubeconfig}")
            demo.step(f"stop all of it with: {shlex.join(demo.stop_command())}")


def scenario(args: argparse.Namespace, demo: Demo, cluster: Cluster, bindir: Path) -> int:
    demo.step("installed " + install(cluster, bindir))
    account = cluster.kubectl("get", "serviceaccount", "-n", SYSTEM_NAMESPACE, "-o", "name",
                              "-l", f"app.kubernetes.io/instance={RELEASE}").split("/")[-1].strip()  # fmt: skip
    token = token_kubeconfig(cluster, service_account=account, namespace=SYSTEM_NAMESPACE,
                             path=demo.workdir / "operator.kubeconfig")  # fmt: skip
    env = {"KUBECONFIG": str(cluster.kubeconfig)}
    # all namespaces, as the chart's default (cluster-wide) RBAC grants
    with socket.socket() as s:  # a free port, so two demos (or a demo beside the tests) never collide
        s.bind(("127.0.0.1", 0))
        liveness = f"http://127.0.0.1:{s.getsockname()[1]}/healthz"
    demo.spawn("operator", ["operator", "--liveness", liveness, "--resync-seconds", "5"],
               {"KUBECONFIG": str(token)})  # fmt: skip
    real = args.engine == "vllm"
    attach = ["attach", "--namespace", NAMESPACE, "--log-dir", str(demo.workdir)]
    sim_env = {**env, "AIS_SIM_TIME_SCALE": str(args.time_scale), "AIS_SIM_LOAD_SECONDS": "300"}
    if real:
        attach += ["--engine", "vllm", "--vllm-python", str(build_tools("vllm"))]
    demo.spawn("engines", attach, sim_env, program="aissim")
    what = "real engines (vLLM 0.25.1 on CPU)" if real else "simulators"
    demo.step(f"operator running with ServiceAccount {account}'s token; {what} attached (logs in {demo.workdir})")
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    body = yaml.safe_load((ROOT / "examples" / "dsv4-flash.yaml").read_text())
    body["spec"]["image"] = SIM_IMAGE
    if real:
        body["spec"]["engine"].pop("speculative")
    cluster.apply(body, namespace=NAMESPACE)
    demo.step(
        "applied examples/dsv4-flash.yaml (" + ("without DSpark, real engine" if real else "image -> simulator") + ")"
    )
    show(cluster)
    wait_for(lambda: ready_reason(ais(cluster)) == "True/AllReplicasReady", timeout=400, interval=2,
             message="Ready")  # fmt: skip
    pod = engine_pod(cluster)
    assert pod is not None
    demo.step(f"Ready: pod {pod['metadata']['name']} on {pod['spec']['nodeName']} at {pod['status']['podIP']}; "
              "the canary passed and the engine runs the asked config")  # fmt: skip
    show(cluster)
    base = f"http://{pod['status']['podIP']}:8000"
    model = body["spec"]["model"]["servedName"]
    done = asyncio.run(load(base, model, seconds=args.load_seconds, concurrency=8, real=real))
    demo.step(f"load: {done} requests at C8 for {args.load_seconds:.0f}s")
    show(cluster)
    first_uid = pod["metadata"]["uid"]
    if real:
        demo.step("stopping the real engine's EngineCore under load: progress stops, /health stays 200")
        threading.Thread(target=lambda: asyncio.run(hang_engine_core(pod, base, model)), daemon=True).start()
    else:
        demo.step("injecting the seed's long-context stall: KV climbs past 97.5%, progress stops, /health stays 200")
        # the long requests run until their engine is recreated under them
        threading.Thread(target=lambda: asyncio.run(stall(base, model)), daemon=True).start()
    degraded = wait_for(
        lambda: next((c for c in (ais(cluster).get("status") or {}).get("conditions") or []
                      if c["type"] == "Degraded" and c["reason"] == "Stalled"), None)
        or (ais(cluster).get("status") or {}).get("lastRoll"),
        timeout=180, interval=1, message="the stall finding",
    )  # fmt: skip
    demo.step(f"detector: {degraded.get('message', degraded)}")
    roll = wait_for(lambda: (ais(cluster).get("status") or {}).get("lastRoll"), timeout=120, interval=1,
                    message="the roll")  # fmt: skip
    demo.step(f"rolled {roll['pod']}: reason {roll['reason']}")
    wait_for(lambda: (p := engine_pod(cluster)) is not None and p["metadata"]["uid"] != first_uid, timeout=120,
             message="the replacement pod")  # fmt: skip
    wait_for(lambda: ready_reason(ais(cluster)) == "True/AllReplicasReady", timeout=400, interval=2,
             message="Ready again")  # fmt: skip
    demo.step("Ready again on a fresh engine")
    show(cluster)
    events = cluster.get_json("events", "-n", NAMESPACE)["items"]
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or ""):
        if e.get("involvedObject", {}).get("kind") == "AscendInferenceService":
            print(f"         event {e['type']:7s} {e['reason']:18s} {e['message'][:110]}", flush=True)
    demo.roll = roll
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--keep", action="store_true",
        help="leave the cluster, operator and engines running; prints the one command that stops them all",
    )  # fmt: skip
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting one")
    parser.add_argument("--time-scale", type=float, default=30.0, help="simulator engine seconds per wall second")
    parser.add_argument(
        "--engine", choices=("sim", "vllm"), default="sim",
        help="sim: the simulator (default); vllm: the real engine, vLLM 0.25.1 on CPU with a tiny model",
    )  # fmt: skip
    parser.add_argument("--load-seconds", type=float, default=20.0, help="length of the load phase")
    parser.add_argument("--workdir", help="where logs and timeline.json go (default: a new temp dir)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="ascend-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    demo = Demo(workdir=workdir)
    try:
        code = run(args, demo)
    except Exception as exc:  # show what failed, then still stop everything (run's finally did)
        demo.step(f"FAILED: {exc}")
        code = 1
    summary = {
        "ok": code == 0,
        "timeline": [{"seconds": round(t, 1), "step": text} for t, text in demo.timeline],
        "roll": demo.roll,
        "pids": demo.pids,
        "processes": demo.processes,
        "stop": demo.stop_command(),
    }
    (workdir / "timeline.json").write_text(json.dumps(summary, indent=2))
    print("\ntimeline:")
    for t, text in demo.timeline:
        print(f"  {t:6.1f}s  {text}")
    return code


if __name__ == "__main__":
    sys.exit(main())
