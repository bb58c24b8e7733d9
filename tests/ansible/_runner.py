"""Runs playbooks/site.yml against a stand-in node the way an operator would.

Why this exists: every scenario needs the same inventory shape (the node under `ascend_nodes`, its
versions and checksums as group vars, exactly like playbooks/inventory/sample) and the same reading of the
result (exit code, PLAY RECAP counters, the text of failures). Keeping it here keeps the tests about
behaviour.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.ansible._node import Node

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
VENV_BIN = Path(sys.executable).parent

RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.MULTILINE,
)

RESULT = re.compile(r"^(\w+): \[")

# What the tests' stand-in node needs beyond a real node's inventory: it is Debian 12 (not on the vendor's
# list, so it is admitted explicitly) and its stand-in driver ships modules, so no kernel headers.
STANDIN_NODE_VARS: dict[str, Any] = {
    "preflight_supported_os": [{"distribution": "Debian", "version": "12"}],
    "preflight_require_kernel_headers": False,
    "driver_build_kernel_module": False,
    # The overlay's free space is the host disk's; keep the real default's meaning but a size CI has.
    "preflight_min_free_gib": 1,
}


def ansible_env(tmp: Path) -> dict[str, str]:
    """Environment for ansible-playbook and ansible-lint: this repo's config, nothing from ~/.ansible."""
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
            "ANSIBLE_HOME": str(tmp / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp / "cp"),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    return env


@dataclass
class Run:
    """Outcome of one ansible-playbook invocation."""

    rc: int
    output: str
    seconds: float

    @property
    def recap(self) -> dict[str, int]:
        found = RECAP.search(self.output)
        if found is None:
            raise AssertionError(f"no PLAY RECAP in output:\n{self.output[-4000:]}")
        return {k: int(v) for k, v in found.groupdict().items() if k != "host"}

    @property
    def text(self) -> str:
        """The output with all whitespace runs collapsed: the YAML result format wraps long messages."""
        return " ".join(self.output.split())

    def task_lines(self, marker: str) -> list[str]:
        """Banner lines ("TASK [...]", "RUNNING HANDLER [...]") that start with `marker`."""
        return [line for line in self.output.splitlines() if line.startswith(marker)]

    def statuses(self, banner: str) -> list[str]:
        """For every banner starting with `banner`, the status of its first result line
        ("ok", "changed", "skipping", "fatal", ...)."""
        lines = self.output.splitlines()
        found = []
        for i, line in enumerate(lines):
            if line.startswith(banner):
                # The first "<status>: [host]" line; 2.19 prints "[ERROR]: ..." and an origin before "fatal".
                for following in lines[i + 1 :]:
                    if following.startswith(("TASK [", "RUNNING HANDLER [", "PLAY ")):
                        found.append("none")
                        break
                    status = RESULT.match(following)
                    if status:
                        found.append(status.group(1))
                        break
        return found


def inventory(node: Node, group_vars: dict[str, Any]) -> dict[str, Any]:
    """Inventory document for one node (pure)."""
    host = {
        "ansible_host": "127.0.0.1",
        "ansible_port": node.port,
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(node.key),
        "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    return {"all": {"children": {"ascend_nodes": {"hosts": {"standin": host}, "vars": group_vars}}}}


def run_playbook(
    node: Node,
    *,
    tmp: Path,
    group_vars: dict[str, Any],
    check: bool = False,
    diff: bool = False,
    tags: str = "",
    timeout: float = 900,
    playbook: str = "site.yml",
) -> Run:
    tmp.mkdir(parents=True, exist_ok=True)
    inv = tmp / f"inventory-{time.monotonic_ns()}.json"
    inv.write_text(json.dumps(inventory(node, group_vars)))
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), str(PLAYBOOKS / playbook)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    if tags:
        cmd.append(f"--tags={tags}")
    start = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=PLAYBOOKS,
        env=ansible_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    run = Run(rc=proc.returncode, output=proc.stdout, seconds=time.monotonic() - start)
    (tmp / f"run-{time.monotonic_ns()}.log").write_text(run.output)
    return run
