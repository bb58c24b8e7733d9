"""The playbook scenarios the Ansible tests assert on, each on its own freshly booted stand-in node.

Why this exists: a scenario (boot a node, run site.yml once or several times, capture what the node
looked like in between) takes tens of seconds to minutes under qemu, so the tests start all of them up
front on a worker pool and then only assert on the captured results. Each function here is one scenario;
nothing is shared between them except the read-only cached roots.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.ansible._node import Node, npu_conf, start_node
from tests.ansible._runner import STANDIN_NODE_VARS, Run, run_playbook
from tests.ansible._standin import STANDIN_DIR, Versions, installed_driver, inventory_vars, write_packages

V1 = Versions(driver="25.5.0", firmware="7.8.0.2.212")
V2 = Versions(driver="25.5.1", firmware="7.8.0.5.216")
CONTAINERD_CONFIG = 'version = 2\n\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'


@dataclass
class Outcome:
    """What one scenario observed."""

    runs: list[Run] = field(default_factory=list)
    logs: list[list[dict[str, str]]] = field(default_factory=list)  # install log after each run
    written: list[dict[str, str]] = field(default_factory=list)  # node files written, after each run
    files: dict[str, str | None] = field(default_factory=dict)  # selected node files after the last run
    # `--tags verify` after each install that stopped for its reboot (the stand-in driver needs none)
    after_reboot: list[Run] = field(default_factory=list)
    kubectl_calls: list[list[str]] = field(default_factory=list)
    before: dict[str, str] = field(default_factory=dict)  # node files written before the first run (seeded)


@contextmanager
def booted(lower: Path, workdir: Path, key: Path, **kwargs: Any) -> Iterator[Node]:
    node = start_node(lower=lower, workdir=workdir, key=key, **kwargs)
    try:
        yield node
    finally:
        node.stop()


@contextmanager
def http_server(directory: Path) -> Iterator[str]:
    """Serve `directory` on 127.0.0.1 (the node shares this machine's network) for URL-sourced packages."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/packages"
    finally:
        server.shutdown()
        server.server_close()


def group_vars(versions: Versions, packages: Path, **overrides: Any) -> dict[str, Any]:
    sums = write_packages(packages, versions)
    values: dict[str, Any] = dict(STANDIN_NODE_VARS)
    values.update(inventory_vars(versions, sums))
    values.update(
        driver_package_local_dir=str(packages),
        cann_package_local_dir=str(packages),
        runtime_package_local_dir=str(packages),
        runtime_mode="HostMounts",
    )
    values.update(overrides)
    return values


def _record(outcome: Outcome, node: Node, run: Run) -> None:
    outcome.runs.append(run)
    outcome.logs.append(node.install_log())
    outcome.written.append(node.written())


def first_install(*, lower: Path, tmp: Path, key: Path) -> Outcome:
    """Install (verify stops for the reboot), `--tags verify` as after the reboot, rerun, then --check
    --diff after chip 5 raised an alarm; Ascend Docker Runtime mode and kubectl labelling on."""
    tmp.mkdir(parents=True, exist_ok=True)
    cluster = tmp / "cluster.json"
    cluster.write_text(json.dumps({"nodes": {"atlas-standin": {"kubernetes.io/arch": "arm64"}}}))
    values = group_vars(
        V1,
        tmp / "packages",
        runtime_mode="AscendDockerRuntime",
        # The stand-in node has a containerd configuration but no containerd service to restart.
        runtime_restart_containerd=False,
        labels_apply=True,
        labels_kubectl=str(STANDIN_DIR / "kubectl"),
        labels_kubeconfig=str(cluster),
        labels_node_name="atlas-standin",
    )
    outcome = Outcome()
    extra = {"/etc/containerd/config.toml": CONTAINERD_CONFIG}
    with booted(lower, tmp / "node", key, extra_files=extra) as node:
        _record(outcome, node, run_playbook(node, tmp=tmp / "ansible", group_vars=values))
        outcome.after_reboot.append(run_playbook(node, tmp=tmp / "ansible", group_vars=values, tags="verify"))
        _record(outcome, node, run_playbook(node, tmp=tmp / "ansible", group_vars=values))
        for path in (
            "/etc/profile.d/ascend-cann.sh",
            "/etc/containerd/config.toml",
            "/etc/ascend_install.info",
            "/usr/local/Ascend/driver/version.info",
        ):
            outcome.files[path] = node.read(path) if node.exists(path) else None
        # Chip 5 raises an alarm (the stand-in npu-smi reads its state on every call). A check run must
        # change nothing and still run verify's read-only probes, which must report the chip.
        sick = node.upper / "etc/ascend-standin/npu.conf"
        sick.write_text(npu_conf(npu_count=8, health=["OK"] * 5 + ["Alarm"] + ["OK"] * 2))
        run = run_playbook(node, tmp=tmp / "ansible", group_vars=values, check=True, diff=True)
        _record(outcome, node, run)
    outcome.kubectl_calls = json.loads(cluster.read_text())["calls"]
    return outcome


def check_then_upgrade(*, lower: Path, tmp: Path, key: Path) -> Outcome:
    """On a bare node: --check --diff (plans, writes nothing), install V1 from a controller directory,
    then V2 downloaded from a URL (the upgrade order); `--tags verify` after each install."""
    outcome = Outcome()
    with booted(lower, tmp / "node", key) as node:
        v1 = group_vars(V1, tmp / "v1")
        _record(outcome, node, run_playbook(node, tmp=tmp / "ansible", group_vars=v1, check=True, diff=True))
        _record(outcome, node, run_playbook(node, tmp=tmp / "ansible", group_vars=v1))
        outcome.after_reboot.append(run_playbook(node, tmp=tmp / "ansible", group_vars=v1, tags="verify"))
        served = tmp / "www" / "packages"
        v2 = group_vars(V2, served, driver_package_source="url", cann_package_source="url")
        with http_server(served.parent) as url:
            v2.update(driver_package_base_url=url, cann_package_base_url=url)
            _record(outcome, node, run_playbook(node, tmp=tmp / "ansible", group_vars=v2))
        outcome.after_reboot.append(run_playbook(node, tmp=tmp / "ansible", group_vars=v2, tags="verify"))
    return outcome


#: npu-smi process rows on a prepared node: the seed's unreaped engine workers, and one npu-smi cannot name.
LEFTOVER_WORKERS = ["0,0,3154821,VLLM::Worker_TP,58520", "1,0,3154822,VLLM::Worker_TP,58512", "5,0,1333928,,37709"]


def preflight_on_a_prepared_node(*, lower: Path, tmp: Path, key: Path) -> Outcome:
    """`--tags preflight` on a node that has a driver (V1) as before an engine restart: leftover workers hold
    HBM (fails), the same allowed (passes), the wider table of newer drivers (fails), then no process and a
    minimum driver above the node's with no driver_version in the inventory (fails on version.info's)."""
    outcome = Outcome()
    conf = "/etc/ascend-standin/npu.conf"
    seeded = {**installed_driver(V1), conf: npu_conf(npu_count=8, health=None, processes=LEFTOVER_WORKERS)}
    with booted(lower, tmp / "node", key, extra_files=seeded) as node:
        values = group_vars(V1, tmp / "packages")
        outcome.before = node.written()

        def run(**overrides: Any) -> None:
            _record(outcome, node, run_playbook(node, tmp=tmp / "ansible", group_vars={**values, **overrides},
                                                tags="preflight"))  # fmt: skip

        run()
        run(preflight_hbm_processes_allowed=True)
        wide = npu_conf(npu_count=8, health=None, processes=LEFTOVER_WORKERS, container_column=True)
        (node.upper / conf.lstrip("/")).write_text(wide)
        run()
        (node.upper / conf.lstrip("/")).write_text(npu_conf(npu_count=8, health=None))
        run(preflight_min_driver_version="25.5.1", driver_version="")
        run(preflight_min_driver_version="24.1.rc2", driver_version="")
    return outcome


def single_run(*, lower: Path, tmp: Path, key: Path, node_kwargs: dict[str, Any], **overrides: Any) -> Outcome:
    """One run of site.yml on a node booted with `node_kwargs` and inventory `overrides`."""
    outcome = Outcome()
    with booted(lower, tmp / "node", key, **node_kwargs) as node:
        run = run_playbook(node, tmp=tmp / "ansible", group_vars=group_vars(V1, tmp / "packages", **overrides))
        _record(outcome, node, run)
    return outcome


def cleanup(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
