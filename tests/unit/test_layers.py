"""The package layers hold: import-linter checks the contracts in .importlinter on every test run.

Why a test and not review: the last review found a package cycle (api -> validation -> render -> api), HTTP
calls in health (documented as pure), clients importing render and a three-module cycle in aissim, each
of which a reviewer had let through. The contracts say what may import what; this test fails with the
import chain that breaks one.
"""

from pathlib import Path

import pytest
from importlinter.api import read_configuration
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".importlinter"

#: The contracts the issue asks for (issue 28 item 2, and item 9's aissim cycle): dropping one from the
#: config must fail here, not pass because nothing was checked.
REQUIRED = {
    "operator-layers",
    "api-leaf",
    "pure-no-io",
    "clients-no-render",
    "operator-acyclic",
    "aissim-layers",
    "aissim-acyclic",
}


def test_every_required_contract_is_configured() -> None:
    contracts = {c["id"] for c in read_configuration(str(CONFIG))["contracts_options"]}
    missing = REQUIRED - contracts
    assert not missing, f"missing from .importlinter: {sorted(missing)}"


def test_the_import_contracts_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    configure()
    kept = lint_imports(config_filename=str(CONFIG), cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert kept, report
