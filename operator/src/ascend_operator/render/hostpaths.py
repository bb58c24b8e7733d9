"""Driver files the engine container needs from the node when no Ascend Docker Runtime injects them.

The list is the one vllm-ascend's installation guide mounts into its container ("Configure software
environment", the `docker run` with `-v /usr/local/dcmi ... -v /etc/ascend_install.info`). The device nodes
(/dev/davinciN, davinci_manager, devmm_svm, hisi_hdc) are not here: the Ascend device plugin hands them to
the container in its Allocate response together with the NPUs. With the Ascend Docker Runtime installed
(mind-cluster ascend-docker-runtime, `ASCEND_VISIBLE_DEVICES`), the runtime mounts the driver itself and
these mounts would collide with its own, hence the switch `spec.runtime.mode`.
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
