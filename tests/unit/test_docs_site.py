"""The docs site builds with `mkdocs build --strict`: every page is in the nav, no link or anchor is broken.

Why: the README points newcomers at docs/ for everything past the overview (issue 28 item 11); a page left
out of the nav, a renamed heading or a moved file would otherwise rot silently. Links that leave docs/ are
checked by the site's hook (hack/lib/mkdocs_hooks.py: a missing target stays a link mkdocs reports).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.fixtures.examples import ROOT

MKDOCS = Path(sys.executable).parent / "mkdocs"


def load_hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "hack" / "lib" / "mkdocs_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not MKDOCS.exists(), reason="mkdocs-material is a dev dependency (hack/venv.sh installs it)")
def test_the_site_builds_strict(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, check=False, env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()


def nav_pages(nav: list[object]) -> set[str]:
    pages: set[str] = set()
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages |= nav_pages(value) if isinstance(value, list) else {str(value)}
    return pages


def test_every_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # !!python/name tags as text
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert nav_pages(config["nav"]) == pages


def test_the_site_shows_links_out_of_docs_as_repository_paths_and_keeps_missing_ones() -> None:
    hooks = load_hooks()
    page = ROOT / "docs" / "deploy.md"
    shown = hooks.site_markdown(
        "see [playbooks/README.md](../playbooks/README.md), its [README](../charts/ascend-inference-operator/README.md)"
        " and [gone](../no/such/file.md)\n```sh test\nkubectl get nodes\n```\n",
        page,
    )
    assert shown == (
        "see `playbooks/README.md`, its README (`charts/ascend-inference-operator/README.md`)"
        " and [gone](../no/such/file.md)\n```sh\nkubectl get nodes\n```\n"
    )
