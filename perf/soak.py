"""`python -m perf.soak --services 3 --minutes 10 --seed 1`: the operator under many faults at once, with
client load, for a long time (issue 38 item 5). On demand, never in CI.

Why: every drill (tests/e2e/test_drills.py, test_health.py, test_npu_faults.py) runs one fault alone on a
quiet service. What a fleet meets is faults overlapping under traffic, and the figures that matter are the
ones no single drill can show: a roll of a pod nothing was wrong with, a request lost on an engine that was
fine, a fault nobody noticed. So:

1. a local control plane of its own (hack/local-cluster: real etcd, kube-apiserver, scheduler, controller
   manager; KWOK plays `services x replicas + spare` Atlas 800 A2 nodes), the CRD, the operator with
   `--npu-faults`, and one shared simulator process for every engine (`aissim attach --shared`, 5x engine
   speed, `--time-scale`);
2. N services of `replicas` engines (examples/dsv4-flash.yaml, health judged in seconds: `HEALTH`) and a
   P/D pair (one prefill engine, `replicas` decode engines, as tests/e2e/test_disaggregation.py runs it),
   all Ready, and closed-loop clients on every serving pod (P/D clients send both legs, as the router does);
3. for D minutes, faults drawn at random (`--seed` replays the same draw) from the catalogue in
   perf/soak_faults.py, one every `--mean-interval` seconds on average (exponential gaps): at most one open
   fault per service, pod faults on a serving pod, cluster faults (operator kill, API server restart) while
   pod faults are open; a pod fault's detection, roll and recovery are watched (perf/soak_watch.py);
4. then no new faults until every open one is recovered (or `--settle` seconds pass), the load stops, and
   perf/soak_report.py judges: per kind injected / detected / rolled / recovered / missed with seconds;
   rolls of pods no fault touched (must be 0); requests lost outside the faulted engines (must be 0).

Results under --out: soak-<seed>.md (the table and the two figures), .json (every fault, roll and request
count), .png (the timeline). Exit status 1 if either figure that must be 0 is not.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from harness.cluster import ROOT, Cluster, established, start_local, stop_local, wait_for
from harness.plant import AISSIM, CRD, CRD_NAME, FAST, Proc, example, label_nodes, start
from perf import soak_faults as sf
from perf import soak_report as report
from perf.soak_watch import Load, PodSeen, Watcher

NAMESPACE = "soak"
#: The P/D service (spec.disaggregation, one prefill engine and `--replicas` decode engines): its roles are
#: services of their own, `pd-prefill` and `pd-decode`.
PD = "pd"
PD_ROLES = (f"{PD}-prefill", f"{PD}-decode")
ROUTER = {"image": "registry.example/vllm-router:0.1.17"}
#: FAST's canary (every 2 s) and scrape (1 s), with:
#: - the stall window services run with (spec.health.stall default 30 s), not the drills' 6 s: the shared
#:   simulator on this loaded 2-core host took no step on an engine for 7 s once (a false Stalled roll);
#: - drift windows a 30-minute run holds (the defaults, 30 s windows x4 after 300 s and 180 s sustained, take
#:   ~7 minutes to learn and judge a pod, and every roll starts a successor over): 15 s windows, 3 of them
#:   after 60 s, 90 s sustained (3 comparable windows needed);
#: - nodeLostSeconds 20: at least KWOK's Lease renewal (10 s) plus slack, as tests/e2e/test_node_lost.py says
#:   (a restarted KWOK takes the other nodes' Leases over only once they lapse);
#: - a roll budget the run's own faults cannot exhaust: a refused roll would read as a missed fault.
HEALTH = {
    **FAST,
    "stall": {"windowSeconds": 30},
    "drift": {"warmupSeconds": 60, "sampleWindowSeconds": 15, "baselineWindows": 3, "sustainSeconds": 90},
    "nodeLostSeconds": 20,
    "rolls": {"maxPerHour": 60, "cooldownSeconds": 0},
}
#: Seconds from a pod's creation until its drift baseline is learned: load (12 s), warm-up, 3 windows, slack.
DRIFT_LEARNED_SECONDS = 150.0
#: The kubelet's first crash back-off (pkg/kubelet/kubelet.go backOffPeriod): the shared simulator restarts a
#: crashed engine after it and writes the restart into the pod's status (aissim/shared.py).
RESTART_BACKOFF_SECONDS = "10"
#: Engine seconds an engine loads before it serves (at every start, a restart after a crash included), as
#: vLLM loads its weights again in a restarted container (minutes for this model; 60 engine s = 12 s wall at
#: 5x): without it a crashed engine answered again 10 s later, inside the canary's vouching window
#: (health/judge.py `_canary_vouches`: 3 scrapes and a canary cycle), and the operator never saw the crash.
LOAD_SECONDS = "60"
#: A faulted pod's requests drain for at most this long before it goes (a drift roll drains).
DRAIN_SECONDS = 5


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m perf.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--services", type=int, default=3)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--spare-nodes", type=int, default=3, help="nodes beyond one per engine, for successors")
    p.add_argument("--minutes", type=float, default=10.0, help="how long faults are drawn")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mean-interval", type=float, default=30.0, help="mean seconds between faults")
    p.add_argument("--clients-per-pod", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=1500, help="output tokens per client request")
    p.add_argument("--kinds", default=",".join(sf.ALL_KINDS), help="fault kinds to draw from, comma-separated")
    p.add_argument("--no-pd", dest="pd", action="store_false", help="no P/D service (no kv-transfer-hang)")
    p.add_argument("--detect-timeout", type=float, default=150.0, help="seconds before a fault counts as missed")
    p.add_argument("--settle", type=float, default=240.0, help="seconds to wait for open faults at the end")
    p.add_argument("--warmup", type=float, default=75.0, help="seconds of load before the first fault")
    p.add_argument(
        "--time-scale",
        default="5",
        help="engine seconds per wall second of the simulators (the e2e tests' 30 turns every millisecond a "
        "starved 2-core host delays an engine step into 30 ms of engine time, which the drift detector reads)",
    )
    p.add_argument(
        "--no-drift",
        action="store_true",
        help="spec.health.drift.enabled false and no drift faults: the control run that tells the drift "
        "detector's false rolls from everything else's",
    )
    p.add_argument("--out", type=Path, default=ROOT / "perf" / "results")
    return p.parse_args(argv)


class Soak:
    def __init__(self, args: argparse.Namespace, cluster: Cluster, work: Path) -> None:
        self.args, self.cluster, self.work = args, cluster, work
        self.rng = random.Random(args.seed)
        self.services = [f"svc{i}" for i in range(args.services)]
        wanted = [k for k in args.kinds.split(",") if k and not (args.no_drift and k == "drift")]
        self.skipped = {k: "not asked for (--kinds)" for k in sf.ALL_KINDS if k not in wanted}
        self.skipped.update({k: why for k in sf.ALL_KINDS if (why := sf.available(k, pd=args.pd)) is not None})
        self.kinds = [k for k in sf.ALL_KINDS if k not in self.skipped]
        self.faults: list[sf.Fault] = []
        self.loads: list[float] = []
        """The host's 1-minute load average, sampled every 10 s (the machine is shared: say how busy)."""
        self.procs: list[Proc] = []
        self.plant: sf.Plant | None = None
        self.supervisor: sf.Supervisor

    def set_up(self) -> sf.Plant:
        c, a = self.cluster, self.args
        c.kubectl("apply", "--server-side", "-f", str(CRD))
        established(c, CRD_NAME)
        for ns in (NAMESPACE, "mindx-dl"):
            c.kubectl("create", "namespace", ns)
        wait_for(lambda: c.kubectl("get", "sa", "default", "-n", NAMESPACE, check=False), timeout=60, message="SA")
        label_nodes(c, c.node_names(), NAMESPACE)
        env = {
            "KUBECONFIG": str(c.kubeconfig),
            "AIS_SIM_TIME_SCALE": a.time_scale,
            "AIS_SIM_LOAD_SECONDS": LOAD_SECONDS,
            "AIS_RESTART_BACKOFF_SECONDS": RESTART_BACKOFF_SECONDS,
        }
        (self.work / "sims").mkdir()
        sim_args = ["attach", "--shared", "-n", NAMESPACE, "--interval", "0.3"]
        self.procs.append(start(sim_args, program=AISSIM, log=self.work / "sims" / "attach.log", env=env))
        plant = sf.Plant(c, NAMESPACE, None, self.work / "operator.log", ("--npu-faults", "--node-loss"))
        plant.restart_operator()
        self.plant = plant
        for name in self.services:
            health = {**HEALTH, "drift": {**HEALTH["drift"], "enabled": False}} if a.no_drift else HEALTH
            body = example(name, node_label=NAMESPACE, replicas=a.replicas, health=health,
                           rollout={"drainSeconds": DRAIN_SECONDS})  # fmt: skip
            c.apply(body, namespace=NAMESPACE)
        if a.pd:  # as tests/e2e/test_disaggregation.py runs a pair on aissim
            body = example(PD, node_label=NAMESPACE, router=ROUTER, health=HEALTH,
                           rollout={"drainSeconds": DRAIN_SECONDS})  # fmt: skip
            body["spec"]["disaggregation"] = {"decode": {"replicas": a.replicas}}
            c.apply(body, namespace=NAMESPACE)
        return plant

    def replicas(self, service: str) -> int:
        return 1 if service == PD_ROLES[0] else self.args.replicas

    @property
    def watched(self) -> list[str]:
        """Every service whose pods serve: the aggregated ones and the P/D roles."""
        return self.services + (list(PD_ROLES) if self.args.pd else [])

    def pick_pod(self, kind: str, watcher: Watcher) -> PodSeen | None:
        """A serving pod of a service with no open fault: a P/D decode pod for a decode fault, else a pod of
        an aggregated service (or of the P/D pair's roles for an engine-wide fault)."""
        pic = watcher.snapshot()
        busy = {f.service for f in self.faults if f.open and f.service}
        if PD_ROLES[1] in busy or PD_ROLES[0] in busy:  # the pair is one service to its clients
            busy |= set(PD_ROLES)
        where = [PD_ROLES[1]] if kind in sf.DECODE_FAULTS else self.services
        candidates = [p for s in where if s not in busy for p in pic.serving(s)]
        if kind == "drift":  # seen only on a pod whose baseline, and a peer's, the operator has learned
            learned = {
                s for s in where if all(pic.now() - p.first_seen >= DRIFT_LEARNED_SECONDS for p in pic.serving(s))
            }
            candidates = [p for p in candidates if p.service in learned]
        return self.rng.choice(candidates) if candidates else None

    def step(self, plant: sf.Plant, watcher: Watcher) -> None:
        """Draw and inject one fault (a cluster fault only when none is open)."""
        pic = watcher.snapshot()
        cluster_open = any(f.open and f.kind in sf.CLUSTER_FAULTS for f in self.faults)
        kind = self.rng.choice(self.kinds)
        if kind in sf.CLUSTER_FAULTS:
            if cluster_open:
                return
            print(f"[soak] +{pic.now():.0f}s {kind}", flush=True)
            self.faults.append(sf.inject_cluster_fault(plant, kind, self.rng, pic.now))
            return
        pod = self.pick_pod(kind, watcher)
        if pod is None:
            return
        print(f"[soak] +{pic.now():.0f}s {kind} on {pod.service}/{pod.name} ({pod.node})", flush=True)
        try:
            self.faults.append(sf.inject_pod_fault(plant, kind, pod, pic.now(), pic=watcher.snapshot()))
        except Exception as exc:  # the API server may be restarting under another fault: draw again later
            print(f"[soak]   not injected: {exc}", flush=True)

    def advance(self, watcher: Watcher) -> None:
        pic = watcher.snapshot()
        for f in self.faults:
            if f.open:
                was_missed = f.missed
                sf.update(f, pic, replicas=self.replicas(f.service), detect_timeout=self.args.detect_timeout)
                if f.missed and not was_missed:
                    print(f"[soak] +{pic.now():.0f}s MISSED {f.kind} on {f.service}/{f.pod}", flush=True)
                    if f.kind in sf.ENGINE_FAULTS and (pod := pic.pods.get(f.uid)) is not None:
                        sf.clear_engine_fault(pod)
                if not f.open:
                    print(f"[soak] +{pic.now():.0f}s closed {f.kind} {f.service}/{f.pod}", flush=True)
            if not f.open and f.restore is not None:
                try:
                    f.restore()
                    f.restore = None
                except Exception as exc:  # retried on the next pass
                    print(f"[soak]   repair of {f.node} failed, retrying: {exc}", flush=True)

    def sample_load(self, watcher: Watcher) -> None:
        if len(self.loads) * 10 <= watcher.picture.now():
            self.loads.append(os.getloadavg()[0])

    def supervise(self, watcher: Watcher) -> None:
        for name in self.supervisor.check():
            print(f"[soak] +{watcher.picture.now():.0f}s {name} had exited: restarted", flush=True)

    def run(self) -> int:
        a = self.args
        plant = self.set_up()
        t0 = time.monotonic()
        watcher = Watcher(str(self.cluster.kubeconfig), NAMESPACE, t0)
        watcher.start()
        self.supervisor = sf.Supervisor(self.cluster)
        wait_for(lambda: all(len(watcher.snapshot().serving(s)) == self.replicas(s) for s in self.watched),
                 timeout=600, interval=1, message="every service serving all its replicas")  # fmt: skip
        load = Load(watcher, self.services, per_pod=a.clients_per_pod, replicas=a.replicas, max_tokens=a.max_tokens,
                    pd=PD_ROLES if a.pd else None)  # fmt: skip
        load.start()
        print(f"[soak] all Ready at +{watcher.picture.now():.0f}s; load on; faults from +{a.warmup:.0f}s", flush=True)
        stop_at = watcher.picture.now() + a.warmup + a.minutes * 60
        next_at = watcher.picture.now() + a.warmup
        while watcher.picture.now() < stop_at:
            if watcher.picture.now() >= next_at:
                self.step(plant, watcher)
                next_at = watcher.picture.now() + self.rng.expovariate(1 / a.mean_interval)
            self.advance(watcher)
            self.supervise(watcher)
            self.sample_load(watcher)
            time.sleep(1.0)
        settle_end = watcher.picture.now() + a.settle
        while any(f.open for f in self.faults) and watcher.picture.now() < settle_end:
            self.advance(watcher)
            self.supervise(watcher)
            time.sleep(1.0)
        load.stop()
        watcher.stop()
        return self.verdict(watcher, load, plant)

    def verdict(self, watcher: Watcher, load: Load, plant: sf.Plant) -> int:
        a, pic = self.args, watcher.snapshot()
        false = report.false_rolls(pic.rolls.values(), self.faults)
        vanished = report.vanished_unrolled(pic, self.faults, end=pic.now())
        lost = report.lost_outside(load.requests, self.faults)
        failed_inside = sum(1 for r in load.requests if not r.ok) - len(lost)
        table = report.table(self.faults, self.skipped)
        summary = (
            f"{a.services} services x {a.replicas} replicas"
            + (f" and a P/D pair (1 prefill, {a.replicas} decode engines)" if a.pd else "")
            + f", {a.minutes:g} min of faults (seed {a.seed}, one per "
            f"{a.mean_interval:g} s on average), {a.clients_per_pod} clients per pod: {len(load.requests)} "
            f"requests, {failed_inside} failed on faulted engines, **{len(lost)} lost outside them**; "
            f"**{len(false)} rolls of pods with no fault**, {len(vanished)} pods gone without a roll record "
            f"or fault; {pic.polls_failed} watcher polls failed (API server down); control-plane components "
            f"restarted after exiting: {self.supervisor.restarts or 'none'}. Host load average (1 min, every 10 s, "
            f"2 cores): median {statistics.median(self.loads or [0.0]):.1f}, max {max(self.loads or [0.0]):.1f}."
        )
        reasons = sorted({r.reason for r in false})
        if false:
            summary += (
                " False rolls by reason: "
                + ", ".join(f"{why} {sum(r.reason == why for r in false)}" for why in reasons)
                + "."
            )
        print(table + "\n\n" + summary, flush=True)
        a.out.mkdir(parents=True, exist_ok=True)
        stem = a.out / f"soak-{a.seed}{'-nodrift' if a.no_drift else ''}"
        report.plot(stem.with_suffix(".png"), self.faults, load.requests, services=self.watched)
        stem.with_suffix(".md").write_text(f"{table}\n\n{summary}\n")
        stem.with_suffix(".json").write_text(json.dumps({
            "args": {k: str(v) for k, v in vars(a).items()},
            "faults": [f.record() for f in self.faults],
            "false_rolls": [asdict(r) for r in false],
            "vanished_unrolled": vanished,
            "lost_outside": [asdict(r) for r in lost],
            "requests": len(load.requests),
            "failed_inside": failed_inside,
            "rolls": [asdict(r) for r in pic.rolls.values()],
            "load_average": self.loads,
            "operator_alive": plant.operator is not None and plant.operator.popen.poll() is None,
        }, indent=2))  # fmt: skip
        return 0 if not false and not lost and not vanished else 1

    def tear_down(self) -> None:
        if self.plant is not None and self.plant.operator is not None:
            self.plant.operator.stop()
        for proc in reversed(self.procs):
            proc.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    work = Path(tempfile.mkdtemp(prefix=f"ais-soak-{uuid.uuid4().hex[:6]}-"))
    nodes = (args.services + args.pd) * args.replicas + args.pd + args.spare_nodes
    cluster = start_local(work / "cluster", nodes=nodes)
    soak = Soak(args, cluster, work)
    try:
        return soak.run()
    finally:
        soak.tear_down()
        left = stop_local(cluster)
        print(f"[soak] work dir {work}; control plane down (left running: {left})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
