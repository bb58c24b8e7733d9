"""mkdocs hooks for the docs site (mkdocs.yml `hooks:`): the pages are also read on GitHub, beside the code.

Why it exists: two things the Markdown does for GitHub readers the site cannot show as written.
- Links that leave docs/ (`../playbooks/README.md`, `../examples/...`) point at repository files the site
  does not carry. Each one whose target exists is shown on the site as the repository path in code; one
  whose target is missing is left as it is, so `mkdocs build --strict` reports it (a rotten link fails).
- docs/deploy.md marks the blocks tests/e2e/test_deploy_guide.py runs with the info string `sh test`,
  which Markdown's fence syntax does not take; on the site they are `sh` blocks.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?P<target>\.\./[^)#\s]+)(?:#[^)]*)?\)")
TESTED_FENCE = re.compile(r"^```(?P<lang>\w+) test[ \t]*$", re.M)


def repository_path(source: Path, target: str) -> str | None:
    """The repository-relative path a link from `source` points at, or None if nothing is there."""
    resolved = (source.parent / target).resolve()
    if not resolved.exists() or ROOT not in resolved.parents:
        return None
    return resolved.relative_to(ROOT).as_posix()


def site_markdown(markdown: str, source: Path) -> str:
    """The page as the site shows it (see the module docstring)."""

    def link(match: re.Match[str]) -> str:
        path = repository_path(source, match["target"])
        if path is None:
            return match[0]
        text = match["text"]
        return f"`{path}`" if text.strip("`").rstrip("/") in (path, path.rsplit("/", 1)[0]) else f"{text} (`{path}`)"

    return TESTED_FENCE.sub(r"```\g<lang>", OUTSIDE_LINK.sub(link, markdown))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return site_markdown(markdown, Path(page.file.abs_src_path))
