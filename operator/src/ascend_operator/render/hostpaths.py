"""Driver files the engine container needs from the node when no Ascend Docker Runtime injects them.

The list is the one vllm-ascend's installation guide mounts into its container (v0.25.1rc1
docs/source/installation.md, "Set up using Docker", A2/A3: `-v /usr/local/dcmi ... -v
/etc/ascend_install.info`). npu-smi is /usr/local/bin/npu-smi on Atlas 800 A2, the path the Ascend Docker
Runtime mounts on these servers too (mind-cluster docs/en/scheduling/references/appendix.md, "Content
Mounted by Ascend Docker Runtime", Table 7 "other devices"; component/ascend-docker-runtime/build/scripts/
base.list); /usr/local/sbin/npu-smi is the edge devices' path (Atlas 200/500 A2 lists). The device nodes
(/dev/davinciN, davinci_manager, devmm_svm, hisi_hdc) are not here: the Ascend device plugin hands them to
the container in its Allocate response together with the NPUs. With the Ascend Docker Runtime installed
(mind-cluster ascend-docker-runtime, `ASCEND_VISIBLE_DEVICES`), the runtime mounts the driver itself and
these mounts would collide with its own, hence the switch `spec.runtime.mode`.

The node side of this list is the playbook's `runtime_host_mounts` (playbooks/roles/runtime/defaults/
main.yml), which the runtime role checks on every HostMounts node; tests/api/test_node_contract.py keeps
the two equal.
"""

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class HostMount:
    """One read-only host path mounted at the same path in the container."""

    name: str
    path: str
    type: str  # hostPath type: Directory or File


ASCEND_HOST_MOUNTS: tuple[HostMount, ...] = (
    HostMount(name="ascend-dcmi", path="/usr/local/dcmi", type="Directory"),
    HostMount(name="ascend-npu-smi", path="/usr/local/bin/npu-smi", type="File"),
    HostMount(name="ascend-driver-lib64", path="/usr/local/Ascend/driver/lib64", type="Directory"),
    HostMount(name="ascend-driver-version", path="/usr/local/Ascend/driver/version.info", type="File"),
    HostMount(name="ascend-install-info", path="/etc/ascend_install.info", type="File"),
)
