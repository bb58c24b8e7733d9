"""Static checks of playbooks/: syntax, ansible-lint's production profile (offline), every option in
meta/argument_specs.yml, and no way to reboot a node except the driver role's handler."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.ansible._runner import PLAYBOOKS, VENV_BIN, ansible_env

pytestmark = pytest.mark.ansible

ROLES = PLAYBOOKS / "roles"


def _yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.yml") if p.is_file())


def test_syntax_check_passes(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "--syntax-check", "site.yml"],
        cwd=PLAYBOOKS,
        env=ansible_env(tmp_path),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_lint_production_profile_passes_offline(tmp_path: Path) -> None:
    env = ansible_env(tmp_path)
    # No galaxy, no schema refresh, no version check: CI only reaches package registries.
    env["ANSIBLE_LINT_NODEPS"] = "1"
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-lint"), "--offline", "--profile", "production", "--strict"],
        cwd=PLAYBOOKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


def test_no_rule_is_skipped_without_a_reason() -> None:
    config = yaml.safe_load((PLAYBOOKS / ".ansible-lint").read_text())
    assert config["profile"] == "production"
    assert not config.get("skip_list"), "a skipped rule needs a comment saying why; none is skipped today"
    noqa = [p for p in _yaml_files(PLAYBOOKS) if "noqa" in p.read_text()]
    assert noqa == []


def test_every_role_default_is_documented_in_argument_specs() -> None:
    for role in sorted(p for p in ROLES.iterdir() if p.is_dir()):
        defaults = yaml.safe_load((role / "defaults/main.yml").read_text()) or {}
        specs = yaml.safe_load((role / "meta/argument_specs.yml").read_text())
        options = specs["argument_specs"]["main"]["options"]
        missing = sorted(set(defaults) - set(options))
        assert missing == [], f"{role.name}: defaults without argument_specs entry: {missing}"
        for name, option in options.items():
            assert option.get("description"), f"{role.name}: {name} has no description"
            assert name.startswith(role.name + "_"), f"{role.name}: {name} is not role-prefixed"


def test_only_the_driver_handler_can_reboot() -> None:
    reboot = re.compile(r"ansible\.builtin\.reboot|\breboot\b\s*:|\bshutdown\b|systemctl\s+reboot|init\s+6")
    offenders = []
    for path in [*_yaml_files(ROLES), PLAYBOOKS / "site.yml"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            if reboot.search(line) and path != ROLES / "driver/handlers/main.yml":
                offenders.append(f"{path.relative_to(PLAYBOOKS)}:{number}: {line.strip()}")
    assert offenders == []
    handlers = yaml.safe_load((ROLES / "driver/handlers/main.yml").read_text())
    rebooting = [h for h in handlers if "ansible.builtin.reboot" in h]
    assert len(rebooting) == 1
    assert rebooting[0]["when"] == "driver_reboot_allowed | bool"
    assert rebooting[0]["listen"] == "Ascend NPU reboot"
