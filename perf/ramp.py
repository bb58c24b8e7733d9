"""`python -m perf.ramp [--minutes 20] [--max-replicas 4] [--load-seconds 60]`: spec.autoscaling under a load
that ramps up and down, on the local control plane with simulated engines at the seed's figures.

Why (issue 40 item 5): the autoscaler's unit and e2e tests use short windows and a simulator 30x faster
than the engine; what a user runs is the defaults (stable window 30 s, panic 6 s, scale-down 300 s) on an
engine at its own speed. This starts a fresh local control plane (hack/local-cluster; KWOK plays
--max-replicas Atlas 800 A2 nodes of 8 NPUs), the operator and `aissim attach --shared` at time scale 1
(the seed's calibrated DeepSeek-V4-Flash TP8 timings, examples/dsv4-flash.yaml's engine: 32 slots), and one
service with `autoscaling: {minReplicas: 1, maxReplicas: N, targets: {ttftP90Seconds: --target}}` (with
--default-targets: `{minReplicas: 1, maxReplicas: N}`, the queue and KV defaults, issue 40's own case). Each new
engine loads its weights for --load-seconds (AIS_SIM_LOAD_SECONDS: the startup grace's "coming capacity").

The load is closed-loop clients (fresh prompts of 2048 tokens, 256 output tokens, ignore_eos, each sent to
a Ready engine pod as the Service would): 8 clients for the first 10% of the ramp, rising linearly to
--peak-clients by 40%, held to 60%, falling back to 2 by 80% and 2 to the end; then none, until the service
is back at one replica. Every 2 s the run records spec.replicas, bound and Ready engine pods, the engines'
own waiting/running gauges and TTFT histograms (scraped from each pod), and status.autoscaling.

Figures (stdout, ramp.md, ramp.json under --out; the plot at --plot): seconds from a sustained queue to a
second Ready replica; seconds from the load falling within one replica's slots, and from idle, to one
replica; requests whose engine TTFT exceeded the target (the engine histograms' own count above the
bucket); NPU-hours against a fixed deployment at maxReplicas and at the peak reached; ScaledUp/ScaledDown
events (flapping); failed client requests. Never part of CI: a full run takes ~30 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes import client, config
from prometheus_client.parser import text_string_to_metric_families

from ascend_operator.api.constants import GROUP, PLURAL, VERSION
from harness.cluster import Cluster, established, start_local, stop_local, wait_for
from perf import ramp_figures as rf
from perf import scale_io as io

NS, NAME, MODEL = "ramp", "ramp", "deepseek-v4-flash"
TTFT = "vllm:time_to_first_token_seconds"
PROMPT, OUTPUT = 2048, 256


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=20.0, help="length of the ramp (the idle tail comes after)")
    p.add_argument("--max-replicas", type=int, default=4)
    p.add_argument("--peak-clients", type=int, default=100, help="closed-loop clients at the peak (32 slots each)")
    p.add_argument("--target", type=float, default=5.0, help="ttftP90Seconds target (a vLLM TTFT bucket bound)")
    p.add_argument(
        "--default-targets",
        action="store_true",
        help="autoscale on the default targets only (issue 40's case); --target then only bounds the TTFT count",
    )
    p.add_argument("--load-seconds", type=float, default=60.0, help="engine weight load time (AIS_SIM_LOAD_SECONDS)")
    p.add_argument("--tail-minutes", type=float, default=12.0, help="most idle time to wait for one replica")
    p.add_argument("--out", type=Path, default=Path("perf/results/ramp"))
    p.add_argument("--plot", type=Path, default=Path("docs/autoscaling-ramp.png"))
    p.add_argument("--state", type=Path, default=Path(tempfile.gettempdir()) / "ais-ramp")
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(f"[ramp {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def clients_at(f: float, peak: int) -> int:
    """Closed-loop clients at fraction `f` of the ramp (0..1); 0 after it."""
    if f >= 1:
        return 0
    if f < 0.1:
        return 8
    if f < 0.4:
        return round(8 + (peak - 8) * (f - 0.1) / 0.3)
    if f < 0.6:
        return peak
    if f < 0.8:
        return round(peak - (peak - 2) * (f - 0.6) / 0.2)
    return 2


@dataclass
class Shared:
    """What the sampler and the load share: Ready engine URLs, the clients wanted, the client outcomes."""

    urls: list[str] = field(default_factory=list)
    clients: int = 0
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    retried: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def service(args: argparse.Namespace) -> dict[str, Any]:
    body = io.service_body(NAME)
    body["spec"]["autoscaling"] = {"minReplicas": 1, "maxReplicas": args.max_replicas}
    if not args.default_targets:
        body["spec"]["autoscaling"]["targets"] = {"ttftP90Seconds": args.target}
    return body


def pods(core: client.CoreV1Api) -> list[Any]:
    listed: list[Any] = core.list_namespaced_pod(NS, label_selector=f"inference.ascend.dev/service={NAME}").items
    return [p for p in listed if p.metadata.deletion_timestamp is None]


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def scrape(url: str, target: float) -> dict[str, float] | None:
    """The engine's waiting and running gauges and its TTFT histogram's count and count at or below `target`
    (summed over label sets, as every DP engine of a pod exports its own)."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=3) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    out = {"waiting": 0.0, "running": 0.0, "count": 0.0, "within": 0.0}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "vllm:num_requests_waiting":
                out["waiting"] += s.value
            elif s.name == "vllm:num_requests_running":
                out["running"] += s.value
            elif s.name == TTFT + "_count":
                out["count"] += s.value
            elif (
                s.name == TTFT + "_bucket"
                and s.labels.get("le") not in (None, "+Inf")
                and abs(float(s.labels["le"]) - target) < 1e-9
            ):
                out["within"] += s.value
    return out


def sample(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, t: float, ttft: dict[str, rf.Counts], target: float
) -> rf.Sample:
    """One row: the service's replicas, its engine pods and their gauges; `ttft` keeps each pod's first and
    last TTFT counts (by uid) for the run's totals."""
    live = pods(core)
    bound = [p for p in live if p.spec.node_name]
    ready = [p for p in live if _ready(p) and p.status.pod_ip]
    waiting = running = 0.0
    for p in bound:
        if not p.status.pod_ip:
            continue
        got = scrape(f"http://{p.status.pod_ip}:8000", target)
        if got is None:
            continue
        waiting += got["waiting"]
        running += got["running"]
        seen = ttft.setdefault(p.metadata.uid, rf.Counts(first=(got["count"], got["within"])))
        seen.last = (got["count"], got["within"])
    body: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, NAME)  # type: ignore[assignment]
    auto = (body.get("status") or {}).get("autoscaling") or {}
    return rf.Sample(
        t=t,
        spec_replicas=int(body["spec"]["replicas"]),
        bound=len(bound),
        ready=len(ready),
        waiting=waiting,
        running=running,
        engine_ttft_p90=auto.get("ttftP90Seconds"),
        desired=auto.get("desiredReplicas"),
        reason=auto.get("reason"),
    )


async def load(shared: Shared) -> None:
    """Closed-loop clients: client i runs while i < shared.clients; a connection refused (a drained pod gone
    before the list caught up: the engine never got the request) is sent once more to another Ready pod."""
    timeout = aiohttp.ClientTimeout(total=900)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(url: str, n: int) -> bool:
            body = {"model": MODEL, "prompt": f"{os.urandom(8).hex()} ramp {n}", "sim_prompt_tokens": PROMPT,
                    "max_tokens": OUTPUT, "ignore_eos": True}  # fmt: skip
            async with session.post(url + "/v1/completions", json=body) as resp:
                await resp.read()
                if resp.status != 200:
                    shared.failed.append(f"{url}: HTTP {resp.status}")
                return resp.status == 200

        async def client_loop(i: int) -> None:
            n = i
            while i < shared.clients and not shared.stop.is_set():
                urls = shared.urls
                if not urls:
                    await asyncio.sleep(0.5)
                    continue
                n += 1
                try:
                    try:
                        ok = await one(urls[n % len(urls)], n)
                    except aiohttp.ClientConnectorError:
                        shared.retried += 1
                        ok = await one(shared.urls[(n + 1) % len(shared.urls)], n)
                    shared.ok += ok
                except (aiohttp.ClientError, TimeoutError) as exc:
                    shared.failed.append(repr(exc))

        tasks: dict[int, asyncio.Task[None]] = {}
        while not shared.stop.is_set():
            for i in range(shared.clients):
                if i not in tasks or tasks[i].done():
                    tasks[i] = asyncio.create_task(client_loop(i))
            await asyncio.sleep(0.5)
        await asyncio.gather(*tasks.values(), return_exceptions=True)


def events(custom_core: client.CoreV1Api) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"ScaledUp": [], "PanicScaledUp": [], "ScaledDown": []}
    for e in custom_core.list_namespaced_event(NS).items:
        if e.reason in out and e.involved_object.name == NAME:
            out[e.reason].append(str(e.message))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    shutil.rmtree(args.state, ignore_errors=True)
    args.state.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    cluster: Cluster = start_local(args.state, nodes=args.max_replicas)
    procs: list[io.Proc] = []
    try:
        cluster.kubectl("apply", "--server-side", "-f", str(io.CRD))
        established(cluster, "ascendinferenceservices.inference.ascend.dev")
        cluster.kubectl("create", "namespace", NS)
        wait_for(lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", NS, check=False), timeout=60,
                 message="default ServiceAccount")  # fmt: skip
        env = {"KUBECONFIG": str(cluster.kubeconfig), "AIS_SIM_TIME_SCALE": "1",
               "AIS_SIM_LOAD_SECONDS": str(args.load_seconds)}  # fmt: skip
        procs.append(io.start("aissim", ["attach", "--shared", "-n", NS, "--interval", "1"], log=args.out / "sim.log",
                              env=env))  # fmt: skip
        port = 19500 + os.getpid() % 400
        operator = io.start("ascend_operator.cli.main", ["operator", "--liveness", f"http://127.0.0.1:{port}/healthz",
                            "--metrics-port", str(port + 400)], log=args.out / "operator.log", env=env)  # fmt: skip
        procs.append(operator)
        io.wait_live(f"http://127.0.0.1:{port}/healthz", operator, timeout=120)
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        cluster.apply(service(args), namespace=NS)
        wait_for(lambda: any(_ready(p) for p in pods(core)), timeout=args.load_seconds + 240, message="one Ready")
        log("service Ready at one replica; ramp starts")
        return _measure(args, core, custom)
    finally:
        for proc in reversed(procs):
            proc.stop()
        stop_local(cluster)


def _measure(args: argparse.Namespace, core: client.CoreV1Api, custom: client.CustomObjectsApi) -> dict[str, Any]:
    shared, ttft, rows = Shared(), dict[str, rf.Counts](), list[rf.Sample]()
    loader = threading.Thread(target=lambda: asyncio.run(load(shared)), daemon=True)
    loader.start()
    ramp, start = args.minutes * 60, time.monotonic()
    clients_series: list[tuple[float, int]] = []
    try:
        while True:
            t = time.monotonic() - start
            shared.clients = clients_at(t / ramp, args.peak_clients)
            clients_series.append((t, shared.clients))
            shared.urls = sorted(f"http://{p.status.pod_ip}:8000" for p in pods(core) if _ready(p) and p.status.pod_ip)
            row = sample(core, custom, t, ttft, args.target)
            rows.append(row)
            if len(rows) % 15 == 0:
                log(f"t={t:.0f}s clients={shared.clients} replicas={row.spec_replicas} ready={row.ready} "
                    f"waiting={row.waiting:.0f} running={row.running:.0f} ttft_p90={row.engine_ttft_p90} "
                    f"ok={shared.ok} failed={len(shared.failed)}")  # fmt: skip
            if t > ramp and row.spec_replicas == 1 and row.bound == 1:
                break
            if t > ramp + args.tail_minutes * 60:
                log("tail over without returning to one replica")
                break
            time.sleep(max(0.0, 2.0 - (time.monotonic() - start - t)))
    finally:
        shared.clients = 0
        shared.stop.set()
        loader.join(timeout=120)
    found = rf.figures(rows, ramp_seconds=ramp, slots=32, max_replicas=args.max_replicas, npus=8)
    found.update(rf.ttft_over(ttft))
    scaled = {k: len(v) for k, v in events(core).items()}
    found.update({"ok": shared.ok, "failed": len(shared.failed), "failures": shared.failed[:20],
                  "resent_after_connection_refused": shared.retried, "events": scaled})  # fmt: skip
    doc = {"args": {k: str(v) for k, v in vars(args).items()}, "figures": found,
           "rows": [asdict(r) for r in rows], "clients": clients_series}  # fmt: skip
    (args.out / "ramp.json").write_text(json.dumps(doc, indent=1))
    (args.out / "ramp.md").write_text(rf.table(found))
    rf.plot(rows, clients_series, target=args.target, ramp_seconds=ramp, path=args.plot)
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    found = run(args)
    print(rf.table(found))
    return 0 if found["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
