"""operator/Dockerfile, checked as far as it can be without a container engine.

Why it exists: the image cannot be built on this machine, so a broken COPY or a renamed entry point
would only show up in someone's registry build. These tests check what the build depends on: the files
it copies exist and are in the build context, the entry point is the package's console script, the
commands it documents exist, and it runs as the non-root user the chart expects.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import tomllib
from pathlib import Path

import yaml

from ascend_operator.cli.main import build_parser
from tests.helm.chart import CHART, ROOT

DOCKERFILE = ROOT / "operator" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _copy_sources() -> list[str]:
    sources = []
    for word, rest in _instructions():
        if word == "COPY" and "--from" not in rest:
            *srcs, _dest = rest.split()
            sources += srcs
    return sources


def _in_context(path: str) -> bool:
    """Whether .dockerignore lets `path` into the build context (last matching pattern wins)."""
    included = True
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            included = negate
    return included


def test_every_copied_path_exists_and_is_in_the_build_context() -> None:
    sources = _copy_sources()
    assert sources == ["pyproject.toml", "README.md", "operator/src"]
    for src in sources:
        assert (ROOT / src).exists(), src
        assert _in_context(src), f"{src} is excluded by .dockerignore"
    assert not _in_context("tests")
    assert not _in_context(".venv")
    assert not _in_context("charts")


def test_the_wheel_inputs_pyproject_names_are_copied() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["readme"] in _copy_sources()
    where = project["tool"]["setuptools"]["packages"]["find"]["where"]
    assert all(w in _copy_sources() for w in where)


def test_entry_point_is_the_aisctl_console_script_and_cmd_is_a_subcommand() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["scripts"]["aisctl"]
    module, func = target.split(":")
    assert callable(getattr(importlib.import_module(module), func))
    instructions = dict(_instructions())
    assert instructions["ENTRYPOINT"] == '["aisctl"]'
    assert instructions["CMD"] == '["operator"]'
    assert build_parser().parse_args(["operator"]).command == "operator"


def test_documented_commands_exist() -> None:
    # the canary is a runnable module of the operator package
    probe = importlib.util.find_spec("ascend_operator.canary.probe")
    assert probe is not None
    assert probe.origin
    assert 'if __name__ == "__main__":' in Path(probe.origin).read_text()
    header = DOCKERFILE.read_text()
    assert "python -m ascend_operator.canary.probe" in header


def test_operator_image_cannot_impersonate_an_engine() -> None:
    """No `vllm` in the operator image and no simulator in its package: an AIS that names the operator image
    by mistake must fail to start, not serve plausible fake metrics and pass the canary."""
    text = DOCKERFILE.read_text()
    assert "vllm" not in "".join(rest for word, rest in _instructions() if word in ("RUN", "COPY"))
    assert "simulator" not in "".join(rest for word, rest in _instructions() if word == "COPY")
    assert importlib.util.find_spec("ascend_operator.sim") is None
    assert "/opt/ais/bin/vllm" not in text
    package = Path(importlib.util.find_spec("ascend_operator").origin or "").parent  # type: ignore[union-attr]
    imports = re.compile(r"^\s*(from|import)\s+aissim\b", re.M)
    offenders = [p for p in package.rglob("*.py") if imports.search(p.read_text())]
    assert not offenders, f"the operator imports the simulator: {offenders}"


def test_base_image_is_pinned_and_user_is_the_charts_non_root_uid() -> None:
    args = [rest for word, rest in _instructions() if word == "ARG"]
    (base,) = [a.split("=", 1)[1] for a in args if a.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), base
    froms = [rest for word, rest in _instructions() if word == "FROM"]
    assert froms
    assert all(f.startswith("${PYTHON_IMAGE}") for f in froms)
    users = [rest for word, rest in _instructions() if word == "USER"]
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    uid, gid = values["podSecurityContext"]["runAsUser"], values["podSecurityContext"]["runAsGroup"]
    assert users == [f"{uid}:{gid}"]
    assert uid != 0
