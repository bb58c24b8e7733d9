"""site.yml against stand-in Atlas 800 A2 nodes: vendor install order, idempotency, check mode, preflight
failures, upgrades, reboots only through the handler, and verification of the chips.

The nodes are arm64 Debian roots executed under qemu-user, so `uname -m` really is aarch64, and an amd64
root of the same suite is the x86_64 node preflight must refuse (see playbooks/README.md, "Tests").
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from tests.ansible import _scenarios as sc

# The cold arm64 root build alone takes about ten minutes; the scenarios share one pool.
pytestmark = [pytest.mark.ansible, pytest.mark.slow, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def outcomes(
    roots: dict[str, Path],
    ssh_key: Path,
    scenario_pool: Callable[..., Future[Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Future[sc.Outcome]]:
    """Start every scenario now (longest first); each test waits only for the one it asserts on."""
    arm, amd = roots["arm64"], roots["amd64"]

    def start(name: str, func: Callable[..., sc.Outcome], lower: Path, **kwargs: Any) -> None:
        futures[name] = scenario_pool(func, lower=lower, tmp=tmp_path_factory.mktemp(name), key=ssh_key, **kwargs)

    futures: dict[str, Future[sc.Outcome]] = {}
    start("first_install", sc.first_install, arm)
    start("prepared_node", sc.preflight_on_a_prepared_node, arm)
    start("check_then_upgrade", sc.check_then_upgrade, arm)
    start("x86_64", sc.single_run, amd, node_kwargs={})
    start("npus_missing", sc.single_run, arm, node_kwargs={"npu_count": 6})
    start("unsupported_os", sc.single_run, arm, node_kwargs={}, preflight_supported_os=[])
    start("bad_checksum", sc.single_run, arm, node_kwargs={}, driver_package_sha256="0" * 64)
    return futures


def result(outcomes: dict[str, Future[sc.Outcome]], name: str) -> sc.Outcome:
    return outcomes[name].result(timeout=1800)


def order(log: list[dict[str, str]]) -> list[str]:
    return [entry["package"] for entry in log]


def test_first_run_installs_in_the_vendors_order(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    first = out.runs[0]
    # Everything installs; only verify stops, because the new driver waits for a reboot (not allowed).
    assert first.recap["failed"] == 1, first.output[-5000:]
    assert first.statuses("TASK [verify : Stop until the node has rebooted into the new driver]") == ["fatal"]
    # First installation: driver before firmware (NPU driver and firmware installation guide), then
    # CANN toolkit, 910B ops and NNAL, then the Ascend Docker Runtime.
    assert order(out.logs[0]) == ["driver", "firmware", "toolkit", "910b-ops", "nnal", "docker-runtime"]
    driver, firmware = out.logs[0][0], out.logs[0][1]
    assert (driver["action"], driver["for_all"]) == ("full", "yes")
    assert firmware["action"] == "full"
    # NNAL and the ops package were installed with the toolkit's environment sourced.
    assert out.logs[0][3]["ascend_home"] == out.logs[0][4]["ascend_home"] == "/usr/local/Ascend/cann"
    assert first.recap["changed"] > 0


def test_first_install_without_reboot_says_reboot_then_verify(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    first = out.runs[0]
    assert "REBOOT REQUIRED on standin: this run installed driver and firmware" in first.text
    assert "--limit standin --tags verify" in first.text
    # What the message says to do works: after the reboot, `--tags verify` passes and changes nothing.
    verify = out.after_reboot[0]
    assert verify.rc == 0, verify.output[-5000:]
    assert verify.recap["changed"] == 0
    assert verify.statuses("TASK [verify : Stop until the node has rebooted into the new driver]") == ["skipping"]


def test_first_run_leaves_a_node_the_operator_can_use(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    assert "8 healthy 910B, driver 25.5.0, firmware 7.8.0.2.212" in out.after_reboot[0].text
    profile = out.files["/etc/profile.d/ascend-cann.sh"] or ""
    assert "/usr/local/Ascend/cann/set_env.sh" in profile
    assert "/usr/local/Ascend/nnal/atb/set_env.sh" in profile
    assert "/usr/local/Ascend/Ascend-Docker-Runtime/ascend-docker-runtime" in (
        out.files["/etc/containerd/config.toml"] or ""
    )
    assert "Driver_Install_For_All=yes" in (out.files["/etc/ascend_install.info"] or "")
    assert "var/log/mindx-dl/devicePlugin" in out.written[0]
    assert "home/HwHiAiUser" in out.written[0]


def test_second_run_changes_nothing(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    second = out.runs[1]
    assert second.rc == 0, second.output[-5000:]
    assert second.recap["changed"] == 0, second.output[-5000:]
    assert out.logs[1] == out.logs[0], "an installer ran again"
    assert out.written[1] == out.written[0], "the rerun wrote files"


def test_the_rerun_checks_npu_smi_for_processes_holding_hbm(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    # First run: no driver yet, no npu-smi, nothing to check; the rerun reads its process table (no process).
    assert out.runs[0].statuses(HBM_CHECK) == ["skipping"]
    assert out.runs[1].statuses(HBM_CHECK) == ["ok"]
    assert "standin: no process outside a pod holds HBM." in out.runs[1].text


HBM_CHECK = "TASK [preflight : Check that no process outside a pod holds HBM]"
DRIVER_CHECK = "TASK [preflight : Check the driver version the operator's placement requires]"


def test_preflight_names_processes_holding_hbm_before_an_engine_restart(
    outcomes: dict[str, Future[sc.Outcome]],
) -> None:
    out = result(outcomes, "prepared_node")
    held, allowed, wide = out.runs[0], out.runs[1], out.runs[2]
    for run in (held, wide):  # npu-smi's table, and the wider one with "Process id in container"
        assert run.rc != 0
        assert run.statuses(HBM_CHECK) == ["fatal"]
        assert "3 process(es) outside any Kubernetes pod hold HBM on standin" in run.text
        assert "PID 3154821 (VLLM::Worker_TP) on NPU 0 chip 0, 58520 MB" in run.text
        assert "PID 3154822 (VLLM::Worker_TP) on NPU 1 chip 0, 58512 MB" in run.text
        assert "PID 1333928 (no name) on NPU 5 chip 0, 37709 MB" in run.text
        assert "set preflight_hbm_processes_allowed to true" in run.text
    assert allowed.rc == 0, allowed.output[-5000:]
    assert "3 process(es) outside any Kubernetes pod hold HBM (PIDs 3154821, 3154822, 1333928), allowed by" in (
        allowed.text
    )
    assert all(run.recap["changed"] == 0 for run in out.runs)
    assert "usr/local/bin/npu-smi" in out.before
    assert all(written == out.before for written in out.written), "a preflight run wrote to the node"


def test_preflight_refuses_a_driver_below_the_services_minimum(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "prepared_node")
    below, above = out.runs[3], out.runs[4]
    assert below.rc != 0
    assert below.statuses(DRIVER_CHECK) == ["fatal"]
    assert "preflight_min_driver_version is 25.5.1" in below.text
    assert "the node would run NPU driver 25.5.0 (/usr/local/Ascend/driver/version.info has Version=25.5.0)" in (
        below.text
    )
    assert above.rc == 0, above.output[-5000:]
    assert "standin: NPU driver 25.5.0 meets preflight_min_driver_version 24.1.rc2" in above.text


def test_check_diff_on_an_installed_node_changes_nothing(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    check = out.runs[2]
    # Only verify fails (chip 5 raised an alarm after the install); everything before it is unchanged.
    assert check.recap["changed"] == 0, check.output[-5000:]
    assert check.recap["failed"] == 1
    assert check.statuses("TASK [verify : Check that every NPU is healthy]") == ["fatal"]
    assert out.logs[2] == out.logs[0]
    assert out.written[2] == out.written[0]


def test_check_diff_on_a_bare_node_plans_but_writes_nothing(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "check_then_upgrade")
    run = out.runs[0]
    assert run.rc == 0, run.output[-5000:]
    assert "steps in first-install order: driver then firmware" in run.text
    assert "CANN 9.0.1: install toolkit, 910b-ops, nnal" in run.text
    assert run.recap["changed"] > 0  # the user, directories and profile script it would create
    assert out.logs[0] == []
    assert out.written[0] == {}


def test_labels_are_applied_once_with_kubectl(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    labels = [call for call in out.kubectl_calls if call[0] == "label"]
    assert labels == [
        [
            "label",
            "node",
            "atlas-standin",
            "--overwrite",
            "accelerator=huawei-Ascend910",
            "host-arch=huawei-arm",
            "accelerator-type=module-910b-8",
            # what the play left on the node, the driver's under the device plugin's own key
            f"huawei.com/driver.version={sc.V1.driver}",
            f"inference.ascend.dev/npu-firmware-version={sc.V1.firmware}",
            "inference.ascend.dev/cann-version=9.0.1",
        ]
    ]
    reads = [call for call in out.kubectl_calls if call[0] == "get"]
    assert len(reads) == 3  # every run reads (also in check mode), only the first writes


def test_reboot_is_requested_only_through_the_handler(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    first, second = out.runs[0], out.runs[1]
    assert first.task_lines("RUNNING HANDLER [driver : Ask the administrator for the reboot]")
    assert "REBOOT REQUIRED on standin" in first.text
    # Not allowed by default, so the rebooting handler is skipped, and nothing else reboots.
    reboot = "RUNNING HANDLER [driver : Reboot so the new NPU driver and firmware take effect]"
    assert first.statuses(reboot) == ["skipping"]
    assert first.statuses("RUNNING HANDLER [driver : Ask the administrator for the reboot]") == ["ok"]
    assert "REBOOT REQUIRED" not in second.text
    assert not second.task_lines("RUNNING HANDLER")


def test_version_mismatch_upgrades_firmware_before_driver(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "check_then_upgrade")
    for install, verify in zip(out.runs[1:], out.after_reboot, strict=True):
        assert install.recap["failed"] == 1, install.output[-5000:]
        assert install.statuses("TASK [verify : Stop until the node has rebooted into the new driver]") == ["fatal"]
        assert verify.rc == 0, verify.output[-5000:]
    new = out.logs[2][len(out.logs[1]) :]
    assert [(e["package"], e["version"]) for e in new] == [("firmware", "7.8.0.5.216"), ("driver", "25.5.1")]
    assert "steps in upgrade order: firmware then driver" in out.runs[2].text
    assert "8 healthy 910B, driver 25.5.1, firmware 7.8.0.5.216" in out.after_reboot[1].text
    assert "REBOOT REQUIRED on standin" in out.runs[2].text
    # The packages came from the URL and were checked, staged and removed again.
    download = "TASK [stage_package : Download a package onto the node]"
    assert out.runs[1].statuses(download) == ["skipping"] * 5  # driver, firmware, three CANN packages
    assert out.runs[2].statuses(download) == ["changed", "changed"]
    assert not [p for p in out.written[2] if p.startswith("var/cache/ascend-node-prep/")]


def test_preflight_refuses_x86_64(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "x86_64")
    run = out.runs[0]
    assert run.rc != 0
    assert "reports architecture x86_64" in run.text
    assert "built for aarch64" in run.text
    assert out.logs[0] == []
    assert out.written[0] == {}


def test_preflight_refuses_missing_npus(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "npus_missing")
    run = out.runs[0]
    assert run.rc != 0
    assert "Found 6 Ascend 910B device(s) (PCI 19e5:d802) on standin, expected 8" in run.text
    assert out.logs[0] == []
    assert out.written[0] == {}


def test_preflight_refuses_an_unsupported_os(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "unsupported_os")
    run = out.runs[0]
    assert run.rc != 0
    assert "runs Debian 12" in run.text
    assert "not in preflight_supported_os" in run.text
    assert out.logs[0] == []


def test_checksum_mismatch_stops_before_any_installer(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "bad_checksum")
    run = out.runs[0]
    assert run.rc != 0
    assert "expected 0000000000000000000000000000000000000000000000000000000000000000" in run.text
    assert out.logs[0] == []


def test_verify_fails_on_an_unhealthy_chip(outcomes: dict[str, Future[sc.Outcome]]) -> None:
    out = result(outcomes, "first_install")
    run = out.runs[2]
    assert run.rc != 0
    assert "shows 8 910B chip(s), 7 healthy; expected 8 with Health OK" in run.text
    assert "5:910B4:Alarm" in run.text
