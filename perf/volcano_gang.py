"""`python -m perf.volcano_gang --vc-scheduler BIN --volcano-crds DIR`: a two-node engine group gang-scheduled
by Volcano's own scheduler on the local control plane, on demand (issue 38 item 4).

Why on demand and not in CI: Volcano is not served by the Go module proxy this project builds from (`go mod
download volcano.sh/volcano@v1.12.1`: 403 for every version), so CI cannot fetch it the way hack/build-k8s.sh
fetches Kubernetes, KWOK and LWS; built from a source checkout (`go build ./cmd/scheduler`, its dependencies
from the proxy) it took 795 s cold and 26 s warm on this 2-core machine (docs/testing.md). Given the binary
and the CRDs of that checkout (config/crd/volcano/bases), this runs what a MindCluster cluster runs:

1. a local control plane (3 fake Atlas nodes) with LeaderWorkerSet v0.7.0, its manager restarted with
   `gangSchedulingManagement.schedulerProvider: volcano` (the only change to hack/local-cluster's config),
   Volcano's CRDs, and `vc-scheduler` (its default actions and plugins, gang among them); Volcano's
   controller manager is not run, so its one write this needs, the default queue's `Open` state, is played;
2. the operator, and examples/dsr1-2node.yaml with 2 replicas (two groups of two pods: 4 nodes' worth),
   `spec.scheduling.schedulerName: volcano` and queue `default`;
3. checks: each group has a PodGroup LWS made (minMember 2, queue default; the API server held it to
   Volcano's CRD schema), group 0's two pods are bound by Volcano, group 1 (3 nodes for 4 pods) has NO pod
   bound, not one of two as pod-by-pod scheduling would leave; then a fourth node joins and group 1 is bound
   whole. Seconds for each step are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from harness.cluster import (
    LOCAL_CLUSTER,
    ROOT,
    Cluster,
    established,
    kill_component,
    restart_component,
    start_local,
    stop_local,
    wait_for,
)
from harness.plant import CRD, CRD_NAME, Proc, label_nodes, start_operator

NAMESPACE = "gang"
#: Volcano's built-in default configuration, written out (pkg/scheduler/util.go:38-51 DefaultSchedulerConf): the
#: scheduler started without --scheduler-conf refuses to run ("Scheduler config is invalid: failed to find Action").
SCHEDULER_CONF = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def gang_lws(cluster: Cluster) -> None:
    """Start LWS, then restart its manager with Volcano as the gang-scheduling provider."""
    assert cluster.state_dir is not None
    env = {**os.environ, "AIS_CLUSTER_DIR": str(cluster.state_dir)}
    subprocess.run([str(LOCAL_CLUSTER), "lws"], env=env, check=True, stdout=subprocess.DEVNULL)
    path = cluster.state_dir / "lws-config.yaml"
    config = json.loads(path.read_text())
    config["gangSchedulingManagement"] = {"schedulerProvider": "volcano"}
    path.write_text(json.dumps(config, indent=2))
    argv = kill_component(cluster.state_dir, "lws-controller")
    restart_component(cluster.state_dir, "lws-controller", argv)
    health = config["health"]["healthProbeBindAddress"]
    wait_for(
        lambda: subprocess.run(["curl", "-sf", f"http://{health}/readyz"], capture_output=True).returncode == 0,
        timeout=120,
        interval=1,
        message="the LWS manager ready again",
    )


def service(nodes_label: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "dsr1-2node.yaml").read_text())
    body["metadata"] = {"name": "dsr1", "namespace": NAMESPACE}
    body["spec"]["replicas"] = 2
    body["spec"]["scheduling"] = {
        "nodeSelector": {"ais-e2e": nodes_label},
        "schedulerName": "volcano",
        "volcano": {"queue": "default"},
    }
    return body


def group_pods(cluster: Cluster) -> dict[str, list[dict[str, Any]]]:
    pods = cluster.get_json("pods", "-n", NAMESPACE)["items"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/group-index", "?"), []).append(pod)
    return groups


def bound(pods: list[dict[str, Any]]) -> int:
    return sum(1 for p in pods if p["spec"].get("nodeName"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perf.volcano_gang", description=__doc__.split("\n\n")[0])
    p.add_argument("--vc-scheduler", type=Path, required=True, help="vc-scheduler built from volcano's source")
    p.add_argument("--volcano-crds", type=Path, required=True, help="volcano's config/crd/volcano/bases")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    work = Path(tempfile.mkdtemp(prefix="ais-gang-"))
    cluster = start_local(work / "cluster", nodes=3)
    procs: list[Proc] = []
    try:
        t0 = time.monotonic()
        gang_lws(cluster)
        for crd in sorted(args.volcano_crds.glob("*.yaml")):
            cluster.kubectl("apply", "--server-side", "-f", str(crd))
        established(cluster, "podgroups.scheduling.volcano.sh")
        established(cluster, "queues.scheduling.volcano.sh")
        conf = work / "volcano-scheduler.conf"
        conf.write_text(SCHEDULER_CONF)
        vc_args = [
            f"--kubeconfig={cluster.kubeconfig}", f"--scheduler-conf={conf}", "--leader-elect=false",
            f"--listen-address=127.0.0.1:{free_port()}", f"--healthz-address=127.0.0.1:{free_port()}",
        ]  # fmt: skip
        vc_log = (work / "vc-scheduler.log").open("ab")
        vc = subprocess.Popen([str(args.vc_scheduler), *vc_args], stdout=vc_log, stderr=subprocess.STDOUT)
        procs.append(Proc(popen=vc, log=work / "vc-scheduler.log"))
        cluster.kubectl("apply", "--server-side", "-f", str(CRD))
        established(cluster, CRD_NAME)
        cluster.kubectl("create", "namespace", NAMESPACE)
        wait_for(
            lambda: cluster.kubectl("get", "sa", "default", "-n", NAMESPACE, check=False), timeout=60, message="SA"
        )
        wait_for(lambda: cluster.kubectl("get", "queue", "default", check=False), timeout=60, message="default queue")
        # vc-controller-manager's queue controller opens the queues (pkg/controllers/queue/queue_controller_action.go
        # openQueue, state/closed.go:32); it is not run here, so its status write is played, as KWOK plays kubelets:
        # the scheduler admits no job to a queue whose state is not Open (plugins/proportion/proportion.go:411)
        opened = json.dumps({"status": {"state": "Open"}})
        for queue in ("root", "default"):
            cluster.kubectl("patch", "queue", queue, "--subresource=status", "--type=merge", "-p", opened)
        label_nodes(cluster, cluster.node_names(), NAMESPACE)
        procs.append(start_operator(cluster, work / "operator.log", port_base=19380))
        print(f"[gang] control plane, LWS (Volcano provider), Volcano up in {time.monotonic() - t0:.1f}s", flush=True)
        t_apply = time.monotonic()
        cluster.apply(service(NAMESPACE), namespace=NAMESPACE)
        wait_for(lambda: bound(group_pods(cluster).get("0", [])) == 2, timeout=300, interval=1, message="group 0 bound")
        t_group0 = time.monotonic()
        groups = group_pods(cluster)
        pgs = {pg["metadata"]["name"]: pg for pg in cluster.get_json("podgroups", "-n", NAMESPACE)["items"]}
        print(f"[gang] group 0 bound by Volcano {t_group0 - t_apply:.1f}s after the apply", flush=True)
        for name, pg in sorted(pgs.items()):
            spec, status = pg["spec"], pg.get("status") or {}
            print(f"[gang] PodGroup {name}: minMember {spec['minMember']}, queue {spec.get('queue')}, "
                  f"phase {status.get('phase')}", flush=True)  # fmt: skip
        for index, pods in sorted(groups.items()):
            for pod in pods:
                meta = pod["metadata"]
                print(f"[gang] group {index} {meta['name']}: scheduler {pod['spec'].get('schedulerName')}, "
                      f"group-name {meta.get('annotations', {}).get('scheduling.k8s.io/group-name')}, "
                      f"node {pod['spec'].get('nodeName')}", flush=True)  # fmt: skip
        failures = []
        if sorted(pg["spec"]["minMember"] for pg in pgs.values()) != [2, 2]:
            failures.append("expected one PodGroup of minMember 2 per group")
        if any(pg["spec"].get("queue") != "default" for pg in pgs.values()):
            failures.append("a PodGroup is not in queue default")
        time.sleep(15)  # several scheduling cycles (1 s each) in which group 1 must stay wholly unbound
        held = bound(group_pods(cluster).get("1", []))
        print(f"[gang] group 1 with 1 free node for 2 pods, 15 s later: {held} of 2 pods bound", flush=True)
        if held != 0:
            failures.append(f"group 1 partly bound ({held} of 2) with room for one pod")
        t_node = time.monotonic()
        label_nodes(cluster, cluster.add_nodes(1), NAMESPACE)
        wait_for(lambda: bound(group_pods(cluster).get("1", [])) == 2, timeout=300, interval=1, message="group 1 bound")
        print(f"[gang] a fourth node joined: group 1 bound whole {time.monotonic() - t_node:.1f}s later", flush=True)
        print("[gang] " + ("FAILED: " + "; ".join(failures) if failures else "gang scheduling held"), flush=True)
        return 1 if failures else 0
    finally:
        for proc in reversed(procs):
            proc.stop()
        left = stop_local(cluster)
        print(f"[gang] work dir {work}; control plane down (left running: {left})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
