"""The node the playbook prepares and the pod the operator renders agree, for each runtime mode.

Why: a hostPath of `type: File` or `Directory` that is missing on the node, or of the other kind, leaves
the engine pod in FailedMount (the issue's /usr/local/bin vs /usr/local/sbin npu-smi). The playbook's
runtime role checks its `runtime_host_mounts` on every HostMounts node; these tests render the pod
(ascend_operator.render) from the playbook's own defaults and fail when a host path the pod mounts is not
one the playbook checks, when the mode names drift apart, or when the sample inventory and the example
service describe different nodes.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.api.spec import RuntimeMode, RuntimeSpec
from ascend_operator.render.pod import MODEL_VOLUME, Owner, build_pod
from tests.fixtures.examples import ROOT

ROLES = ROOT / "playbooks" / "roles"
SAMPLE_VARS = ROOT / "playbooks" / "inventory" / "sample" / "group_vars" / "ascend_nodes.yml"


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


RUNTIME_DEFAULTS: dict[str, Any] = _yaml(ROLES / "runtime" / "defaults" / "main.yml")
RUNTIME_SPECS: dict[str, Any] = _yaml(ROLES / "runtime" / "meta" / "argument_specs.yml")
PLAYBOOK_MODES: list[str] = RUNTIME_SPECS["argument_specs"]["main"]["options"]["runtime_mode"]["choices"]


def node_host_paths(node_vars: dict[str, Any]) -> set[tuple[str, str]]:
    """(path, hostPath type) the runtime role checks on a node with these variables."""
    if node_vars["runtime_mode"] != "HostMounts":
        return set()  # the Ascend Docker Runtime injects the driver; the role checks no host path
    return {(m["path"], m["type"]) for m in node_vars["runtime_host_mounts"]}


def pod_host_paths(example_body: dict[str, Any], mode: str) -> set[tuple[str, str]]:
    """(path, type) of every hostPath the engine pod mounts from the node, the weights excepted."""
    body = copy.deepcopy(example_body)
    body["spec"]["runtime"]["mode"] = mode
    pod = build_pod(parse_resource(body).spec, owner=Owner(name="dsv4-flash", namespace="default"), replica=0)
    return {
        (v["hostPath"]["path"], v["hostPath"]["type"])
        for v in pod["spec"]["volumes"]
        if "hostPath" in v and v["name"] != MODEL_VOLUME
    }


@pytest.mark.parametrize("mode", PLAYBOOK_MODES)
def test_every_host_path_the_pod_mounts_is_one_the_playbook_checks(example_body: dict[str, Any], mode: str) -> None:
    node = node_host_paths({**RUNTIME_DEFAULTS, "runtime_mode": mode})
    pod = pod_host_paths(example_body, mode)
    assert sorted(pod - node) == [], f"{mode}: the pod mounts host paths the playbook does not check"
    # And the role checks nothing the pod does not mount: one list, two places.
    assert pod == node


def test_host_mounts_pod_mounts_the_driver_files(example_body: dict[str, Any]) -> None:
    # The vllm-ascend container guide's list, npu-smi where Atlas 800 A2 keeps it.
    assert pod_host_paths(example_body, "HostMounts") == {
        ("/usr/local/dcmi", "Directory"),
        ("/usr/local/bin/npu-smi", "File"),
        ("/usr/local/Ascend/driver/lib64", "Directory"),
        ("/usr/local/Ascend/driver/version.info", "File"),
        ("/etc/ascend_install.info", "File"),
    }
    assert pod_host_paths(example_body, "AscendDockerRuntime") == set()


def test_playbook_mode_names_are_the_api_names() -> None:
    assert [m.value for m in RuntimeMode] == PLAYBOOK_MODES
    assert RUNTIME_DEFAULTS["runtime_mode"] == RuntimeSpec().mode.value
    assert RUNTIME_SPECS["argument_specs"]["main"]["options"]["runtime_mode"]["default"] == RuntimeSpec().mode.value


def test_sample_inventory_prepares_the_nodes_the_example_asks_for(example_body: dict[str, Any]) -> None:
    sample = {**RUNTIME_DEFAULTS, **_yaml(SAMPLE_VARS)}
    assert sample["runtime_mode"] == example_body["spec"]["runtime"]["mode"]
    assert node_host_paths(sample) == pod_host_paths(example_body, example_body["spec"]["runtime"]["mode"])
    # The example's nodeSelector picks labels the labels role puts on every prepared node.
    labels = _yaml(ROLES / "labels" / "defaults" / "main.yml")["labels_node_labels"]
    selector = example_body["spec"]["scheduling"]["nodeSelector"]
    assert selector.items() <= labels.items()


def test_verify_runs_the_npu_smi_the_pod_mounts() -> None:
    verify = _yaml(ROLES / "verify" / "defaults" / "main.yml")
    assert (verify["verify_npu_smi"], "File") in node_host_paths(RUNTIME_DEFAULTS)
