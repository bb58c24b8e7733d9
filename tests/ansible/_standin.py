"""Stand-in Ascend packages for the Ansible tests.

Why this exists: the roles install vendor `.run` packages that only run on Atlas hardware. The tests need
packages with the same file names, command line, exit codes and on-disk results (version.info,
/etc/ascend_install.info, set_env.sh, npu-smi), built from the shell templates in standin/. This module
renders them for a requested set of versions and reports the SHA-256 sums the inventory must carry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

STANDIN_DIR = Path(__file__).resolve().parent / "standin"
ARCH = "aarch64"


@dataclass(frozen=True)
class Versions:
    """The versions one playbook run asks for."""

    driver: str
    firmware: str
    cann: str = "9.0.1"
    docker_runtime: str = "7.0.0"


def _render(template: str, **values: str) -> str:
    text = (STANDIN_DIR / template).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


def package_files(versions: Versions, *, arch: str = ARCH) -> dict[str, str]:
    """File name -> script text of every package a run with `versions` needs (pure)."""
    common = (STANDIN_DIR / "common.sh").read_text()
    npu_smi = (STANDIN_DIR / "npu-smi").read_text().rstrip("\n")
    files = {
        f"Ascend-hdk-910b-npu-driver_{versions.driver}_linux-{arch}.run": _render(
            "driver.run.in", VERSION=versions.driver, COMMON=common, NPU_SMI=npu_smi
        ),
        f"Ascend-hdk-910b-npu-firmware_{versions.firmware}.run": _render(
            "firmware.run.in", VERSION=versions.firmware, COMMON=common
        ),
        f"Ascend-docker-runtime_{versions.docker_runtime}_linux-{arch}.run": _render(
            "docker-runtime.run.in", VERSION=versions.docker_runtime, COMMON=common
        ),
    }
    for package, prefix in (
        ("toolkit", "Ascend-cann-toolkit"),
        ("910b-ops", "Ascend-cann-910b-ops"),
        ("nnal", "Ascend-cann-nnal"),
    ):
        files[f"{prefix}_{versions.cann}_linux-{arch}.run"] = _render(
            "cann.run.in", VERSION=versions.cann, PACKAGE=package, COMMON=common
        )
    return files


def write_packages(directory: Path, versions: Versions, *, arch: str = ARCH) -> dict[str, str]:
    """Write the packages into `directory`; return file name -> SHA-256."""
    directory.mkdir(parents=True, exist_ok=True)
    sums = {}
    for name, text in package_files(versions, arch=arch).items():
        path = directory / name
        path.write_text(text)
        path.chmod(0o755)
        sums[name] = hashlib.sha256(text.encode()).hexdigest()
    return sums


def inventory_vars(versions: Versions, sums: dict[str, str]) -> dict[str, str]:
    """The group_vars a real inventory would carry for these packages (versions and checksums)."""
    by_prefix = {name.split("_", 1)[0]: digest for name, digest in sums.items()}
    return {
        "driver_version": versions.driver,
        "driver_firmware_version": versions.firmware,
        "driver_package_sha256": by_prefix["Ascend-hdk-910b-npu-driver"],
        "driver_firmware_package_sha256": by_prefix["Ascend-hdk-910b-npu-firmware"],
        "cann_version": versions.cann,
        "cann_toolkit_sha256": by_prefix["Ascend-cann-toolkit"],
        "cann_ops_sha256": by_prefix["Ascend-cann-910b-ops"],
        "cann_nnal_sha256": by_prefix["Ascend-cann-nnal"],
        "runtime_docker_runtime_version": versions.docker_runtime,
        "runtime_docker_runtime_sha256": by_prefix["Ascend-docker-runtime"],
    }


def installed_driver(versions: Versions, *, install_path: str = "/usr/local/Ascend") -> dict[str, str]:
    """Node path -> text of what the stand-in driver package leaves that preflight reads (version.info and
    npu-smi), to boot a node that already has a driver without running the install (pure)."""
    info = f"Version={versions.driver}\nascendhal_version=7.35.23\npackage_version={versions.driver}\n"
    npu_smi = (STANDIN_DIR / "npu-smi").read_text().replace("@INSTALL_PATH@", install_path)
    return {f"{install_path}/driver/version.info": info, "/usr/local/bin/npu-smi": npu_smi}
