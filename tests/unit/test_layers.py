"""The package layers hold: import-linter checks the contracts in .importlinter on every test run.

Why a test and not review: the last review found a package cycle (api -> validation -> render -> api), HTTP
calls in health (documented as pure), clients importing render and a three-module cycle in aissim, each
of which a reviewer had let through. The contracts say what may import what; this test fails with the
import chain that breaks one.
"""

import ast
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
    "aissim-reads-facts-only",
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


#: Trees outside the two distributions and what each may not import (the top-level package of an import):
#: the demo (hack/), the experiments (perf/) and the shared harness never reach into tests/, and no test or
#: harness module needs an experiment. What they share lives in harness/.
OUTSIDE = {
    "hack": {"tests", "perf"},
    "perf": {"tests"},
    "harness": {"tests", "perf"},
    "tests": {"perf"},
}
#: Tests of perf/'s own code, which import what they test.
TESTS_OF_PERF = {
    "tests/e2e/test_scale.py",
    "tests/health/test_bench_detectors.py",
    "tests/perf/test_scale_figures.py",
    "tests/perf/test_ramp_figures.py",
    "tests/perf/test_soak_report.py",
    "tests/perf/test_mixed_sim.py",
}


def _imported_tops(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


@pytest.mark.parametrize("tree", sorted(OUTSIDE))
def test_the_demo_perf_and_the_harness_import_no_tests(tree: str) -> None:
    files = (ROOT / tree).rglob("*.py")
    reached = {str(path.relative_to(ROOT)): _imported_tops(path) & OUTSIDE[tree] for path in files}
    broken = {where: sorted(tops) for where, tops in sorted(reached.items()) if tops and where not in TESTS_OF_PERF}
    assert not broken, broken
