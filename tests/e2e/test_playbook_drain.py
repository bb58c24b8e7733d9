"""The Kubernetes side of the playbook's reboot path, for real: cordon, drain, refuse, uncordon.

Why: the stand-in nodes of tests/ansible cannot reboot, so the handlers that run before
`ansible.builtin.reboot` never run there, and a drain of the wrong node, a cordon mark verify cannot find,
or a refusal that lets a serving node reboot would only show on a fleet. Here the driver role's handlers
(all but the reboot and the reboot-required message, which need a real node; `listen` dropped so they
run as tasks, in their file order as handlers do) and verify's uncordon block, taken from the role files
unchanged, run with ansible-playbook on localhost against the local control plane with its kubectl: a
fake Atlas node runs a Deployment's pod, as a node serving an engine would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cluster import ROOT, Cluster, wait_for

pytestmark = pytest.mark.timeout(600)

ROLES = ROOT / "playbooks" / "roles"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
MARK = "ascend-node-prep/cordoned-for-reboot"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def pre_reboot_tasks() -> list[dict[str, Any]]:
    """The driver role's handlers that run before the reboot, as plain tasks in handler order (pure)."""
    tasks = []
    for handler in _load(ROLES / "driver" / "handlers" / "main.yml"):
        assert handler.pop("listen") == "Ascend NPU reboot"
        if not {"ansible.builtin.reboot", "ansible.builtin.debug"} & handler.keys():
            tasks.append(handler)
    return tasks


def uncordon_tasks() -> list[dict[str, Any]]:
    """verify's uncordon block, unchanged (pure)."""
    (block,) = [t for t in _load(ROLES / "verify" / "tasks" / "main.yml") if t["name"].startswith("Uncordon")]
    return [block]


def run_tasks(tasks: list[dict[str, Any]], extra: dict[str, Any], tmp: Path) -> subprocess.CompletedProcess[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:6]
    (tmp / f"tasks-{tag}.yml").write_text(yaml.safe_dump(tasks, sort_keys=False))
    play = [
        {
            "name": "reboot path",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "tasks": [{"name": "Run the role's tasks", "ansible.builtin.include_tasks": f"tasks-{tag}.yml"}],
        }
    ]
    (tmp / f"play-{tag}.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp / f"vars-{tag}.json").write_text(json.dumps(extra))
    env = {
        "ANSIBLE_LOCAL_TEMP": str(tmp / "local"),
        "ANSIBLE_HOME": str(tmp / "home"),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{ANSIBLE_PLAYBOOK.parent}:/usr/bin:/bin",
    }
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(tmp / f"play-{tag}.yml"), "-e", f"@{tmp / f'vars-{tag}.json'}"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def role_vars(cluster: Cluster, node: str, **overrides: Any) -> dict[str, Any]:
    """The driver and verify defaults and vars, pointed at this cluster's kubectl and `node`."""
    values: dict[str, Any] = {}
    for role in ("driver", "verify"):
        values |= _load(ROLES / role / "defaults" / "main.yml") | _load(ROLES / role / "vars" / "main.yml")
    values |= {
        "driver_reboot_allowed": True,
        "driver_kubectl": cluster.kubectl_bin,
        "driver_kubeconfig": str(cluster.kubeconfig),
        "driver_node_name": node,
        "driver_drain_timeout": 120,
        "ansible_python_interpreter": sys.executable,
    }
    return values | overrides


def serving_node(cluster: Cluster, add_nodes: Callable[[int], list[str]], namespace: str) -> str:
    """A fresh fake node running one pod of a Deployment, as a node holding an engine replica."""
    (node,) = add_nodes(1)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "engine", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "engine"}},
            "template": {
                "metadata": {"labels": {"app": "engine"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "engine", "image": "engine:test"}],
                },
            },
        },
    }
    cluster.apply(deployment, namespace=namespace)
    wait_for(lambda: running_pods(cluster, node), timeout=90, message=f"a Running pod on {node}")
    return node


def running_pods(cluster: Cluster, node: str) -> list[str]:
    pods = cluster.get_json("pods", "-A", "--field-selector", f"spec.nodeName={node}")["items"]
    return [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def node_state(cluster: Cluster, node: str) -> tuple[bool, bool]:
    """(cordoned, carries the playbook's cordon mark)."""
    body = cluster.get_json("node", node)
    return bool(body["spec"].get("unschedulable")), MARK in body["metadata"].get("annotations", {})


def test_drain_before_the_reboot_then_uncordon_after_verify(
    cluster: Cluster, add_nodes: Callable[[int], list[str]], namespace: str, tmp_path: Path
) -> None:
    node = serving_node(cluster, add_nodes, namespace)
    drained = run_tasks(pre_reboot_tasks(), role_vars(cluster, node), tmp_path / "drain")
    assert drained.returncode == 0, drained.stdout[-4000:]
    assert node_state(cluster, node) == (True, True)
    assert running_pods(cluster, node) == []  # evicted; the replacement cannot land on the cordoned node

    uncordoned = run_tasks(uncordon_tasks(), role_vars(cluster, node), tmp_path / "uncordon")
    assert uncordoned.returncode == 0, uncordoned.stdout[-4000:]
    assert node_state(cluster, node) == (False, False)
    wait_for(lambda: running_pods(cluster, node), timeout=90, message="the engine back on the uncordoned node")


def test_a_cordon_the_administrator_set_stays(
    cluster: Cluster, add_nodes: Callable[[int], list[str]], namespace: str, tmp_path: Path
) -> None:
    node = serving_node(cluster, add_nodes, namespace)
    cluster.kubectl("cordon", node)
    drained = run_tasks(pre_reboot_tasks(), role_vars(cluster, node), tmp_path / "drain")
    assert drained.returncode == 0, drained.stdout[-4000:]
    assert node_state(cluster, node) == (True, False)
    assert running_pods(cluster, node) == []
    uncordoned = run_tasks(uncordon_tasks(), role_vars(cluster, node), tmp_path / "uncordon")
    assert uncordoned.returncode == 0, uncordoned.stdout[-4000:]
    assert node_state(cluster, node) == (True, False)


def test_without_drain_a_serving_node_is_not_rebooted(
    cluster: Cluster, add_nodes: Callable[[int], list[str]], namespace: str, tmp_path: Path
) -> None:
    node = serving_node(cluster, add_nodes, namespace)
    (pod,) = running_pods(cluster, node)
    refused = run_tasks(pre_reboot_tasks(), role_vars(cluster, node, driver_drain=False), tmp_path / "refuse")
    assert refused.returncode != 0
    text = " ".join(refused.stdout.split())
    assert f"Not rebooting localhost: Kubernetes node {node} is not cordoned and still runs {pod}." in text
    assert node_state(cluster, node) == (False, False)
    assert running_pods(cluster, node) == [pod]


def test_without_drain_a_drained_node_may_reboot(
    cluster: Cluster, add_nodes: Callable[[int], list[str]], namespace: str, tmp_path: Path
) -> None:
    node = serving_node(cluster, add_nodes, namespace)
    cluster.kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
    allowed = run_tasks(pre_reboot_tasks(), role_vars(cluster, node, driver_drain=False), tmp_path / "allowed")
    assert allowed.returncode == 0, allowed.stdout[-4000:]
    assert node_state(cluster, node) == (True, False)
