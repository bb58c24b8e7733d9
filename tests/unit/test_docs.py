"""The install docs say what a newcomer needs, and say it consistently: links, placeholders, the safe order.

Why: docs/deploy.md is run by tests/e2e/test_deploy_guide.py, but only its `sh test` blocks; these checks
cover what runs nowhere: that every placeholder a tested block uses is documented, that links resolve,
that the chart's README and NOTES uninstall in the order that does not strand finalizers and give the
recovery command, and that NOTES says how to get `aisctl`.
"""

import re
from pathlib import Path

import pytest

from tests.e2e.test_deploy_guide import GUIDE, PLACEHOLDERS, guide_blocks
from tests.fixtures.examples import ROOT

CHART = ROOT / "charts" / "ascend-inference-operator"
DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    CHART / "README.md",
    ROOT / "playbooks" / "README.md",
]
FINALIZER_RECOVERY = """patch ais <name> --type=merge -p '{"metadata":{"finalizers":null}}'"""


def test_guide_documents_every_placeholder_its_tested_blocks_use() -> None:
    text = GUIDE.read_text()
    table = set(re.findall(r"^\| `([A-Z_]+)` \|", text, re.M))
    assert table == set(PLACEHOLDERS)
    used = {name for block in guide_blocks(text) for name in re.findall(r"\$\{?([A-Z][A-Z_]*)", block)}
    assert used == set(PLACEHOLDERS)


def test_guide_tests_the_path_up_to_the_first_request_and_back() -> None:
    blocks = guide_blocks(GUIDE.read_text())
    joined = "\n".join(blocks)
    order = ["helm install", "apply -f examples/dsv4-flash.yaml", "condition=Ready", "/v1/chat/completions"]
    order += ["helm upgrade", "delete ais", "helm uninstall"]
    assert [joined.index(step) for step in order] == sorted(joined.index(step) for step in order)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", doc.read_text()):
        assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)} links to missing {target}"


def test_chart_readme_uninstalls_services_before_the_operator() -> None:
    text = (CHART / "README.md").read_text()
    section = text.split("## Uninstall\n", 1)[1].split("\n## ", 1)[0]
    assert section.index("kubectl delete ais") < section.index("helm uninstall") < section.index("delete crd")
    assert FINALIZER_RECOVERY in section


def test_notes_say_how_to_install_aisctl_and_uninstall_safely() -> None:
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert notes.index("python3 -m pip install .") < notes.index("aisctl plan")
    assert notes.index("kubectl delete ais --all -A --wait") < notes.index("helm uninstall")
    assert FINALIZER_RECOVERY in notes


def test_guide_names_the_example_images_and_the_vendored_figures(example_body: dict[str, object]) -> None:
    text = GUIDE.read_text()
    spec = example_body["spec"]
    assert isinstance(spec, dict)
    assert f"`{spec['image']}`" in text
    assert "quay.io/ascend/vllm-ascend:v0.25.1rc1" in text
    assert "examples/weights-check-job.yaml" in text
    for mode in ("HostMounts", "AscendDockerRuntime"):
        assert f"| `{mode}`" in text
