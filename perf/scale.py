"""`python -m perf.scale --services 10,50,200 --runs 3 [--load [--stall]]`: what one operator costs per service.

Why: a platform team runs one operator for its whole fleet, so its CPU, memory, API traffic and status
writes per service, and how fast a new service gets its pod, decide how far it scales (issue 14). Each run
starts a fresh local control plane (hack/local-cluster: real etcd, kube-apiserver, scheduler,
controller-manager; KWOK plays N Atlas 800 A2 nodes, each advertising huawei.com/Ascend910: "8"), then:

1. the limit: N pods, rendered by the operator's own renderer from examples/dsv4-flash.yaml, created one
   after another straight through the API; create call -> pod bound (spec.nodeName, seen by a watch);
   then they are force-deleted, freeing the nodes;
2. the operator (`aisctl operator`, default settings, as a subprocess) and one shared simulator process for
   every engine (`aissim attach --shared`); N AscendInferenceServices created the same way; CR create call
   -> pod bound; then every service Ready;
3. an idle steady window (operator CPU from /proc/<pid>/stat, RSS, API requests from the API server's own
   apiserver_request_total), and with --load a second window under one request/s per 10 services;
   and with --stall one engine then hangs under that load: seconds until the operator deletes its pod;
   then, on the running fleet, 3 new services one at a time, each right after a direct pod: create call ->
   pod bound (polled every 20 ms), the reaction time a team sees, where step 2's burst measures throughput;
4. a baseline window with the operator stopped, subtracted from the windows' request rates (that counter
   has no client label; see perf/scale_figures.py).

Never part of CI's timed tests: a 200-service run takes minutes. Results: a markdown table on stdout and
`scale.md` / `scale.json` (every raw figure, per run) under --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kubernetes import client, config

from harness.cluster import Cluster, established, start_local, stop_local, wait_for
from perf import scale_figures as fig
from perf import scale_io as io

NS_DIRECT, NS_SERVICES = "scale-direct", "scale"
#: New services created one at a time on the running fleet (each beside a direct pod), for reaction time;
#: seven per run left the per-run ratio at 200 between 1.4x and 2.3x (docs/scale.md, fourth series).
PROBES = 15


def _ints(value: str) -> list[int]:
    return [int(v) for v in value.split(",") if v]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m perf.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--services", type=_ints, default=[10, 50, 200], help="service counts, comma-separated")
    p.add_argument("--runs", type=int, default=3, help="runs per service count (fresh cluster each)")
    p.add_argument("--load", action="store_true", help="also a window under 1 request/s per 10 services")
    p.add_argument(
        "--stall", action="store_true",
        help="after the load window (needs --load), hang one engine and time its roll (the 45 s target)",
    )  # fmt: skip
    p.add_argument("--window", type=float, default=60.0, help="seconds of each steady window")
    p.add_argument("--baseline-window", type=float, default=30.0, help="seconds without the operator")
    p.add_argument("--ready-timeout", type=float, default=900.0, help="seconds for every service to be Ready")
    p.add_argument("--time-scale", default="1", help="AIS_SIM_TIME_SCALE of the engines (1: real engine speed)")
    p.add_argument("--out", type=Path, default=None, help="directory for scale.json / scale.md")
    p.add_argument(
        "--from-json", type=Path, nargs="+", default=None, metavar="SCALE_JSON",
        help="print the table of earlier runs' scale.json files (merged) instead of running",
    )  # fmt: skip
    p.add_argument("--state", type=Path, default=io.ROOT / ".cluster" / "scale", help="local clusters' state")
    return p.parse_args(argv)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def steady_window(
    operator: io.Proc, kubectl: Callable[..., str], seconds: float
) -> tuple[float, float, int, dict[fig.Key, float], dict[fig.Key, float]]:
    """(wall seconds, operator CPU seconds, operator RSS at the end, counts before, counts after)."""
    before, cpu0, t0 = io.apiserver_counts(kubectl), operator.cpu(), time.monotonic()
    time.sleep(seconds)
    after, cpu1, t1 = io.apiserver_counts(kubectl), operator.cpu(), time.monotonic()
    return t1 - t0, cpu1 - cpu0, operator.rss(), before, after


def pass_figures(readings: dict[str, fig.PassHistogram]) -> dict[str, dict[str, float | None]]:
    """Median and p90 pass durations of each loop in each window (idle, load, stall: the readings in order)."""
    names = list(readings)
    out: dict[str, dict[str, float | None]] = {}
    for before, after in itertools.pairwise(names):
        for loop in ("health", "reconcile"):
            for q in (0.5, 0.9):
                value = fig.pass_quantile(readings[before], readings[after], loop, q)
                out.setdefault(after, {})[f"{loop}_p{round(q * 100)}"] = value
    return out


def probe(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> dict[str, list[float]]:
    """PROBES new services on the running fleet, one at a time, each right after a direct pod (side by side):
    seconds from the create call to the pod bound."""
    out: dict[str, list[float]] = {"cr": [], "direct": [], "cr_seen": [], "cr_call": [], "direct_call": []}
    for i in range(PROBES):
        called, _, bound = io.probe_bound(core, NS_DIRECT, io.create_pod(core, NS_DIRECT), f"probe-{i}")
        out["direct"].append(bound)
        out["direct_call"].append(called)
        called, seen, bound = io.probe_bound(core, NS_SERVICES, io.create_service(custom, NS_SERVICES), f"probe-{i}")
        out["cr"].append(bound)
        out["cr_seen"].append(seen)
        out["cr_call"].append(called)
        time.sleep(1.0)
    io.delete_pods(core, NS_DIRECT, timeout=120)
    return out


def reaction(results: list[dict[str, Any]]) -> str:
    """The reaction table: a new service on a running fleet of N, and a stall under load, medians over runs.
    Beside the target's ratio (from the CR's create call): the ratio from the CR stored, and the ratio an
    operator taking no time at all would score (the CR's own write plus its pod's, docs/scale.md)."""
    lines = [
        "| services | runs | new CR on the running fleet -> pod bound p50 (s) | (CR create call) | (pod seen) "
        "| direct create p50 (s) | ratio | ratio from the CR stored | zero-time operator | "
        "stall -> roll under load (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def p50(key: str) -> str:  # median over the runs of each run's p50; "-" for runs saved before the key
        found = [r[key] for r in runs if r.get(key)]
        return f"{fig.median(fig.percentile(v, 50) for v in found):.3f}" if found else "-"

    for n in sorted({r["services"] for r in results}):
        runs = [r for r in results if r["services"] == n and r.get("probe_cr_s")]
        if not runs:
            continue
        cr = fig.median(fig.percentile(r["probe_cr_s"], 50) for r in runs)
        direct = fig.median(fig.percentile(r["probe_direct_s"], 50) for r in runs)
        timed = [
            fig.reaction(r["probe_cr_s"], r["probe_cr_call_s"], r["probe_direct_s"])
            for r in runs
            if r.get("probe_cr_call_s")
        ]
        stored = f"{fig.median(t.ratio_stored for t in timed):.1f}x" if timed else "-"
        floor = f"{fig.median(t.floor for t in timed):.2f}x" if timed else "-"
        stalls = [r["stall_roll_s"] for r in runs if r.get("stall_roll_s") is not None]
        stall = f"{fig.median(stalls):.1f}" if stalls else "-"
        lines.append(
            f"| {n} | {len(runs)} | {cr:.3f} | {p50('probe_cr_call_s')} | {p50('probe_cr_seen_s')} | {direct:.3f} "
            f"| {cr / direct:.1f}x | {stored} | {floor} | {stall} |"
        )
    return "\n".join(lines)


def run_once(n: int, index: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One fresh cluster, one limit, one operator measurement; the raw figures."""
    state = args.state / f"n{n}-r{index}"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    logs = out / f"n{n}-r{index}"
    logs.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    cluster: Cluster = start_local(state, nodes=n + 2 * PROBES)  # room for the probes
    log(f"N={n} run {index}: cluster up with {n + 2 * PROBES} nodes in {time.monotonic() - t_start:.0f}s")
    procs: list[io.Proc] = []
    try:
        cluster.kubectl("apply", "--server-side", "-f", str(io.CRD))
        established(cluster, "ascendinferenceservices.inference.ascend.dev")  # kubectl wait fails on a new CRD
        for ns in (NS_DIRECT, NS_SERVICES):
            cluster.kubectl("create", "namespace", ns)
            wait_for(
                lambda ns=ns: cluster.kubectl("get", "serviceaccount", "default", "-n", ns, check=False),  # type: ignore[misc]
                timeout=60, message=f"default ServiceAccount in {ns}",
            )  # fmt: skip
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))  # type: ignore[no-untyped-call]
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        names = [f"svc-{i:03d}" for i in range(n)]

        direct = io.create_and_bind(core, NS_DIRECT, names, io.create_pod(core, NS_DIRECT), timeout=300)
        log(f"direct: {n} pods bound, p50 {fig.percentile(direct, 50):.2f}s max {max(direct):.2f}s")
        io.delete_pods(core, NS_DIRECT, timeout=120)

        env = {"KUBECONFIG": str(cluster.kubeconfig), "AIS_SIM_TIME_SCALE": args.time_scale}
        sim = io.start(
            "aissim", ["attach", "--shared", "-n", NS_SERVICES, "--interval", "1"], log=logs / "sim.log", env=env
        )
        procs.append(sim)
        port = 19000 + os.getpid() % 500
        liveness, own_metrics = f"http://127.0.0.1:{port}/healthz", f"http://127.0.0.1:{port + 500}/metrics"
        operator = io.start(
            "ascend_operator.cli.main",
            ["operator", "--liveness", liveness, "--metrics-port", str(port + 500)],
            log=logs / "operator.log",
            env=env,
        )
        procs.append(operator)
        io.wait_live(liveness, operator, timeout=120)
        time.sleep(2)  # its watches are established before the first service
        t_cr = time.monotonic()
        cr = io.create_and_bind(core, NS_SERVICES, names, io.create_service(custom, NS_SERVICES), timeout=600)
        log(f"operator: {n} pods bound, p50 {fig.percentile(cr, 50):.2f}s max {max(cr):.2f}s")
        deadline = time.monotonic() + args.ready_timeout
        while (ready := io.ready_count(custom, NS_SERVICES)) < n and time.monotonic() < deadline:
            if operator.popen.poll() is not None:
                raise RuntimeError(f"the operator exited with {operator.popen.poll()}; see {operator.log}")
            time.sleep(2)
        all_ready = time.monotonic() - t_cr if ready == n else None
        # a run where not every service got Ready in time is measured anyway (what it took is the finding)
        log(f"{ready}/{n} Ready {time.monotonic() - t_cr:.0f}s after the first create; idle window {args.window:.0f}s")
        windows: dict[str, Any] = {}
        load_avg = {"before": os.getloadavg()}
        sim_cpu0 = sim.cpu()
        passes = {"start": io.pass_histogram(own_metrics)}
        windows["idle"] = steady_window(operator, cluster.kubectl, args.window)
        passes["idle"] = io.pass_histogram(own_metrics)
        sim_cores = (sim.cpu() - sim_cpu0) / windows["idle"][0]
        sim_rss = sim.rss()
        load_stats: dict[str, int] = {}
        stall_s: float | None = None
        rolls: list[str] = []
        if args.load:
            rate = n / 10
            with io.Load(io.pod_endpoints(core, NS_SERVICES), rate) as load:
                log(f"load window: {rate:g} requests/s")
                windows["load"] = steady_window(operator, cluster.kubectl, args.window)
                passes["load"] = io.pass_histogram(own_metrics)
                if args.stall:  # reaction time at this scale: one engine hangs with the load's requests on it
                    stall_s = io.stall_to_roll(core, NS_SERVICES)
                    log(f"stall -> roll: {stall_s if stall_s is None else round(stall_s, 1)}s")
                    passes["stall"] = io.pass_histogram(own_metrics)
                    time.sleep(2)  # the roll record is written before the delete; let a slow watch deliver it
                    rolls = io.roll_messages(custom, NS_SERVICES)
                    log(f"roll: {rolls}")
            load_stats = {"sent": load.sent, "ok": load.ok}
        load_avg["after"] = os.getloadavg()
        pass_s = pass_figures(passes)
        log(f"pass durations: {pass_s}")
        probes = probe(core, custom)
        log(f"a new service on the running fleet: CR -> bound {probes['cr']}, direct {probes['direct']}")
        operator.stop()
        time.sleep(2)
        log(f"baseline window without the operator: {args.baseline_window:.0f}s")
        b_before, t0 = io.apiserver_counts(cluster.kubectl), time.monotonic()
        time.sleep(args.baseline_window)
        b_after, t1 = io.apiserver_counts(cluster.kubectl), time.monotonic()
        baseline = fig.rates(b_before, b_after, t1 - t0)
        figures: dict[str, Any] = {}
        for mode, (seconds, cpu, rss, before, after) in windows.items():
            w, own = fig.window(
                seconds=seconds, cpu_delta=cpu, rss=rss, counts_before=before, counts_after=after,
                baseline=baseline, services=n,
            )  # fmt: skip
            figures[mode] = {
                "figures": asdict(w),
                "operator_rates": {fig.label(k): r for k, r in own.items()},
                "all_rates": {fig.label(k): r for k, r in fig.rates(before, after, seconds).items()},
            }
        return {
            "services": n, "run": index, "direct_bound_s": direct, "cr_bound_s": cr, "all_ready_s": all_ready,
            "ready": ready,
            "windows": figures, "baseline_rates": {fig.label(k): r for k, r in baseline.items()},
            "sim": {"engines": n, "rss_mb": sim_rss / 1e6, "cores_idle": sim_cores}, "load": load_stats,
            "stall_roll_s": stall_s, "probe_cr_s": probes["cr"], "probe_direct_s": probes["direct"],
            "probe_cr_seen_s": probes["cr_seen"], "probe_cr_call_s": probes["cr_call"],
            "probe_direct_call_s": probes["direct_call"], "pass_s": pass_s, "roll_messages": rolls,
            "loadavg": load_avg, "wall_s": time.monotonic() - t_start,
        }  # fmt: skip
    finally:
        for proc in reversed(procs):
            proc.stop()
        stop_local(cluster)


def rows(results: list[dict[str, Any]]) -> list[fig.Row]:
    """Median rows per (service count, mode) over the runs."""
    out: list[fig.Row] = []
    for n in sorted({r["services"] for r in results}):
        runs = [r for r in results if r["services"] == n]
        for mode in ("idle", "load"):
            with_mode = [r for r in runs if mode in r["windows"]]
            if not with_mode:
                continue
            windows = [
                fig.rewindow(r["windows"][mode]["figures"], r["windows"][mode]["operator_rates"]) for r in with_mode
            ]
            cr = [r["cr_bound_s"] for r in with_mode]
            direct = [r["direct_bound_s"] for r in with_mode]
            ready = min(r.get("ready", n) for r in with_mode)
            out.append(fig.row(n, mode, windows, cr, direct, ready=ready))
    return out


def recorded_args(args: argparse.Namespace) -> dict[str, Any]:
    """The run's arguments for the JSON file, with paths inside the repository made relative to it (a
    results file committed to perf/results/ names no directory of the machine it ran on)."""
    recorded = dict(vars(args))
    for key, value in recorded.items():
        if isinstance(value, Path):
            inside = value.is_relative_to(io.ROOT)
            recorded[key] = str(value.relative_to(io.ROOT)) if inside else "(outside the repository)"
    return recorded


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.from_json:
        saved = [r for path in args.from_json for r in json.loads(path.read_text())["results"]]
        print(fig.markdown(rows(saved)) + "\n\n" + reaction(saved))
        return 0
    out = args.out or io.ROOT / "bench-results" / time.strftime("scale-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    for n in args.services:
        for index in range(args.runs):
            results.append(run_once(n, index, args, out))
            io.dump(out / "scale.json", {"args": recorded_args(args), "results": results})
    table = fig.markdown(rows(results)) + "\n\n" + reaction(results)
    (out / "scale.md").write_text(table + "\n")
    print(table)
    log(f"wall time {time.monotonic() - started:.0f}s; raw figures in {out / 'scale.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
