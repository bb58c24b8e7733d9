"""The preflight role's node checks on this machine: the driver version against the services' minimum (in
the operator's own order of versions) and processes holding HBM in npu-smi's process table.

Why on localhost: the checks read two files (version.info, npu-smi's output), so each case runs the role's
task file (`tasks_from`) with a connection to this machine in a few seconds, where a stand-in node under
qemu takes a minute; test_site.py runs the same tasks inside site.yml on an arm64 node. npu-smi here is the
stand-in the stand-in driver installs (tests/ansible/standin/npu-smi), pointed at a config of the case's.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ascend_operator.render.fitness import meets, version_key
from tests.ansible._node import npu_conf
from tests.ansible._runner import PLAYBOOKS, VENV_BIN, Run, ansible_env
from tests.ansible._standin import STANDIN_DIR

pytestmark = pytest.mark.ansible

VERSIONS = ["23.0.6", "24.1.rc2", "24.1.rc3", "24.1.0", "24.1.1", "24.1", "25.5.1", "26.0.rc1", "26.0.0",
            "24.1.RC2", "25", "25.5.x", "", "24.1.rc2.b060", "100.0.0",
            # the label's raw DCMI forms (server/manager.go:304-306): upper-case rc, a build of a version
            "26.0.RC1", "24.1.rc3.B061", "25.5.1.b030", "24.1.b060", "24.1.b060.1"]  # fmt: skip


KEY_LINE = re.compile(r"KEY\|(?P<version>[^|]*)\|(?P<key>[^|]*)\|(?P<valid>True|False)")


def play(tmp: Path, tasks_from: str, variables: dict[str, Any]) -> Run:
    """Run the preflight role's `tasks_from` file against this machine with `variables`."""
    tmp.mkdir(parents=True, exist_ok=True)
    playbook = tmp / "play.yml"
    playbook.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "vars": variables,
                    "tasks": [
                        {"ansible.builtin.import_role": {"name": "preflight", "tasks_from": tasks_from}},
                    ],
                }
            ]
        )
    )
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter":
                                                 str(VENV_BIN / "python")}}}}  # fmt: skip
    (tmp / "inventory.json").write_text(json.dumps(inventory))
    env = ansible_env(tmp)
    env["ANSIBLE_ROLES_PATH"] = str(PLAYBOOKS / "roles")
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(tmp / "inventory.json"), str(playbook)],
        cwd=PLAYBOOKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return Run(rc=proc.returncode, output=proc.stdout + proc.stderr, seconds=0.0)


def test_the_playbook_orders_driver_versions_as_the_operator_does(tmp_path: Path) -> None:
    """vars/main.yml's key against render/fitness.py, on every pair: a node the preflight admits is one the
    operator's node affinity admits, and a version the operator cannot read is refused by both."""
    tmp_path.mkdir(exist_ok=True)
    playbook = tmp_path / "keys.yml"
    playbook.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "vars_files": [str(PLAYBOOKS / "roles/preflight/vars/main.yml")],
                    "tasks": [
                        {
                            "ansible.builtin.debug": {
                                "msg": "KEY|{{ item }}|{{ preflight_version_key }}|{{ preflight_version_valid | bool }}"
                            },
                            "vars": {"preflight_version_input": "{{ item }}"},
                            "loop": VERSIONS,
                        }
                    ],
                }
            ]
        )
    )
    env = ansible_env(tmp_path)
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", str(playbook)],
        cwd=PLAYBOOKS,
        env={**env, "ANSIBLE_PYTHON_INTERPRETER": str(VENV_BIN / "python")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    keys: dict[str, tuple[str, bool]] = {}
    for line in proc.stdout.splitlines():
        if found := KEY_LINE.search(line):
            keys[found["version"]] = (found["key"], found["valid"] == "True")
    assert sorted(keys) == sorted(VERSIONS)
    for version, (_, valid) in keys.items():
        assert valid == (version_key(version) is not None), version
    for have, want in itertools.product(VERSIONS, repeat=2):
        (have_key, have_valid), (want_key, want_valid) = keys[have], keys[want]
        assert (have_valid and want_valid and have_key >= want_key) == meets(have, want), (have, want)


@pytest.fixture
def driver_file(tmp_path: Path) -> Path:
    path = tmp_path / "driver" / "version.info"
    path.parent.mkdir(parents=True)
    path.write_text("Version=25.5.0\nascendhal_version=7.35.23\npackage_version=25.5.0\n")
    return path


def test_a_driver_below_the_minimum_fails_naming_the_variable_and_the_version_found(
    tmp_path: Path, driver_file: Path
) -> None:
    variables = {"preflight_min_driver_version": "25.5.1", "preflight_driver_version_file": str(driver_file)}
    run = play(tmp_path / "run", "driver_version.yml", variables)
    assert run.rc != 0
    assert "preflight_min_driver_version is 25.5.1" in run.text
    assert "the node would run NPU driver 25.5.0" in run.text
    assert f"{driver_file} has Version=25.5.0" in run.text
    assert "huawei.com/driver.version" in run.text


@pytest.mark.parametrize(
    ("minimum", "planned", "passes"),
    [
        ("24.1.rc2", "", True),  # 25.5.0 on the node
        ("25.5.0", "", True),
        ("25.5.rc1", "", True),  # an rc precedes its release
        ("25.5.1", "25.5.1", True),  # the play upgrades the node to the minimum
        ("25.5.1", "25.5.0.rc9", False),  # ... or to a version still below it
        ("24.1.RC2", "", True),  # the label's upper-case form (26.0.RC1 in DCMI's own strings)
        ("24.1.b060", "", False),  # not a version the operator reads (a build of no whole version): refused
    ],
)
def test_the_minimum_is_checked_against_the_driver_this_play_leaves(
    tmp_path: Path, driver_file: Path, minimum: str, planned: str, passes: bool
) -> None:
    variables = {"preflight_min_driver_version": minimum, "preflight_driver_version_file": str(driver_file)}
    if planned:
        variables["driver_version"] = planned
    run = play(tmp_path / "run", "driver_version.yml", variables)
    assert (run.rc == 0) == passes, run.output[-3000:]
    if not passes and minimum == "24.1.b060":
        assert "not a driver version" in run.text
    if planned and not passes:
        assert "driver_version, which this play installs" in run.text


def test_no_minimum_reads_nothing(tmp_path: Path) -> None:
    run = play(tmp_path / "run", "driver_version.yml", {"preflight_driver_version_file": str(tmp_path / "none")})
    assert run.rc == 0, run.output[-3000:]
    assert run.statuses("TASK [preflight : Check the driver version the operator's placement requires]") == ["skipping"]


def absent_pids(count: int) -> list[int]:
    """PIDs no process on this machine has (npu-smi reports host PIDs; these are outside any pod)."""
    pids = [p for p in range(3154821, 3154821 + 1000) if not os.path.exists(f"/proc/{p}")]
    return pids[:count]


def fake_npu_smi(tmp: Path, conf: str) -> Path:
    """The stand-in npu-smi with an installed driver's version.info, reading `conf` instead of /etc's."""
    root = tmp / "Ascend"
    (root / "driver").mkdir(parents=True)
    (root / "driver" / "version.info").write_text("Version=25.5.0\n")
    (tmp / "npu.conf").write_text(conf)
    text = (STANDIN_DIR / "npu-smi").read_text().replace("@INSTALL_PATH@", str(root))
    script = tmp / "npu-smi"
    script.write_text(text.replace("/etc/ascend-standin/npu.conf", str(tmp / "npu.conf")))
    script.chmod(0o755)
    return script


def hbm_conf(*, procs: list[str], container_column: bool = False, npu_count: int = 8) -> str:
    return npu_conf(npu_count=npu_count, health=None, processes=procs, container_column=container_column)


CHECK_HBM = "TASK [preflight : Check that no process outside a pod holds HBM]"


def test_no_process_in_the_table_passes(tmp_path: Path) -> None:
    smi = fake_npu_smi(tmp_path, hbm_conf(procs=[]))
    run = play(tmp_path / "run", "hbm.yml", {"preflight_npu_smi": str(smi)})
    assert run.rc == 0, run.output[-3000:]
    assert run.statuses(CHECK_HBM) == ["ok"]


@pytest.mark.parametrize("container_column", [False, True])
def test_processes_holding_hbm_fail_with_their_pids_and_names(tmp_path: Path, container_column: bool) -> None:
    """The seed's unreaped workers on NPUs 0 and 1, and a process npu-smi cannot name on NPU 2, in both
    widths of the table (newer drivers add "Process id in container")."""
    a, b, c = absent_pids(3)
    procs = [f"0,0,{a},VLLM::Worker_TP,58520", f"1,0,{b},VLLM::Worker_TP,58512", f"2,0,{c},,37709"]
    smi = fake_npu_smi(tmp_path, hbm_conf(procs=procs, container_column=container_column))
    run = play(tmp_path / "run", "hbm.yml", {"preflight_npu_smi": str(smi)})
    assert run.rc != 0
    assert run.statuses(CHECK_HBM) == ["fatal"]
    assert "3 process(es) outside any Kubernetes pod hold HBM on localhost" in run.text
    assert f"PID {a} (VLLM::Worker_TP) on NPU 0 chip 0, 58520 MB" in run.text
    assert f"PID {b} (VLLM::Worker_TP) on NPU 1 chip 0, 58512 MB" in run.text
    assert f"PID {c} (no name) on NPU 2 chip 0, 37709 MB" in run.text
    assert "preflight_hbm_processes_allowed" in run.text


def test_processes_holding_hbm_pass_when_allowed_and_are_still_named(tmp_path: Path) -> None:
    [a] = absent_pids(1)
    smi = fake_npu_smi(tmp_path, hbm_conf(procs=[f"3,0,{a},VLLM::Worker_TP,58520"]))
    run = play(tmp_path / "run", "hbm.yml", {"preflight_npu_smi": str(smi), "preflight_hbm_processes_allowed": True})
    assert run.rc == 0, run.output[-3000:]
    assert f"1 process(es) outside any Kubernetes pod hold HBM (PIDs {a}), allowed by" in run.text


def test_a_process_of_a_pod_is_not_counted(tmp_path: Path) -> None:
    """A PID whose cgroup matches the pod pattern (here this test's own process, with a pattern its cgroup
    matches, as a pod's matches kubepods) is an engine the kubelet runs; the leftover beside it is named."""
    [a] = absent_pids(1)
    own = os.getpid()
    pattern = Path(f"/proc/{own}/cgroup").read_text().splitlines()[0].split(":", 2)[2] or "/"
    procs = [f"0,0,{own},VLLM::EngineCor,61000", f"1,0,{a},VLLM::Worker_TP,58520"]
    smi = fake_npu_smi(tmp_path, hbm_conf(procs=procs))
    variables = {"preflight_npu_smi": str(smi), "preflight_pod_cgroup_pattern": re.escape(pattern)}
    run = play(tmp_path / "run", "hbm.yml", variables)
    assert run.rc != 0
    assert "1 process(es) outside any Kubernetes pod hold HBM on localhost" in run.text
    assert f"PID {a} (VLLM::Worker_TP)" in run.text
    assert f"PID {own} " not in run.text
    # the default pattern: this machine's test process is in no pod
    run = play(tmp_path / "default", "hbm.yml", {"preflight_npu_smi": str(smi)})
    assert "2 process(es) outside any Kubernetes pod hold HBM on localhost" in run.text


def test_a_process_table_missing_npus_is_not_taken_for_an_idle_node(tmp_path: Path) -> None:
    smi = fake_npu_smi(tmp_path, hbm_conf(procs=[], npu_count=6))
    run = play(tmp_path / "run", "hbm.yml", {"preflight_npu_smi": str(smi)})
    assert run.rc != 0
    assert "shows a process table for 6 of 8 NPUs" in run.text


def test_no_npu_smi_no_driver_nothing_to_check(tmp_path: Path) -> None:
    run = play(tmp_path / "run", "hbm.yml", {"preflight_npu_smi": str(tmp_path / "absent")})
    assert run.rc == 0, run.output[-3000:]
    assert run.statuses(CHECK_HBM) == ["skipping"]
