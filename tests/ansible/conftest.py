"""Fixtures for the Ansible suite: cached debootstrap roots, an SSH key, stand-in packages, and a pool
that runs the independent playbook scenarios two at a time.

Why a pool: each scenario boots its own node from a fresh overlay of the cached root, so scenarios share
nothing and can run concurrently; the arm64 node executes every module under qemu, so running them one
after another would double the suite's wall time on a 2-core machine.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.ansible._runner import REPO

ROOT_SCRIPT = REPO / "hack" / "ansible-root.sh"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.ansible)


def _build_root(arch: str) -> Path:
    if os.geteuid() != 0:
        pytest.skip("the Ansible suite needs root (debootstrap, chroot, overlay mounts)")
    proc = subprocess.run(["bash", str(ROOT_SCRIPT), arch], capture_output=True, text=True, timeout=3000, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/ansible-root.sh {arch} failed:\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def roots() -> dict[str, Path]:
    """The cached arm64 and amd64 roots (built once; both builds run at the same time)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {arch: pool.submit(_build_root, arch) for arch in ("arm64", "amd64")}
        return {arch: f.result() for arch, f in futures.items()}


@pytest.fixture(scope="session")
def ssh_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = tmp_path_factory.mktemp("ssh") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.fixture(scope="session")
def scenario_pool() -> Iterator[Callable[..., Future[Any]]]:
    """Submit a scenario function to run in the background, two at a time."""
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="scenario") as pool:
        yield pool.submit
