"""CPU and memory of the engine container, defaulted from the node profile so a pod is never BestEffort.

An engine pod with only the NPU resource set is BestEffort: under memory pressure the kubelet evicts it
first, while it holds 64Gi of memory-backed /dev/shm and minutes of weight loading. The defaults make it
Burstable: a CPU request and a memory request equal to the memory limit. A `medium: Memory`
emptyDir is tmpfs whose files count against the memory limit of the container that writes them
(Kubernetes docs, Volumes > emptyDir; the API's EmptyDirVolumeSource.sizeLimit: usage is capped at the
smaller of sizeLimit and the pod's memory limits), so the memory default is the engine's own working
memory plus `runtime.shmSize`. Pure.
"""

import re
from dataclasses import dataclass
from decimal import Decimal

from ascend_operator.api.constants import NPU_RESOURCE
from ascend_operator.api.spec import AscendInferenceServiceSpec


@dataclass(frozen=True, kw_only=True)
class NodeProfile:
    """What one node offers an engine pod that takes all its NPUs."""

    name: str
    cpus: int
    memory: str


#: Atlas 800 A2 (inference): 4 x Kunpeng 920 (192 cores) and up to ~1.5 TB of DDR4. hack/kwok's fake
#: node advertises 192 CPUs and 502Gi, the smaller figure the defaults must also fit.
ATLAS_800_A2 = NodeProfile(name="Atlas 800 A2", cpus=192, memory="1536Gi")
#: A quarter of the node's cores: the API server, tokenizer/detokenizer and one busy process per NPU.
DEFAULT_CPU = "48"
#: Host memory of the engine itself (API server, engine core, 8 workers, pinned staging buffers), on
#: top of /dev/shm; weights stream into HBM and their page cache is reclaimable.
DEFAULT_ENGINE_MEMORY = "256Gi"

_SUFFIX = {
    "": Decimal(1), "m": Decimal("0.001"),
    "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
    "P": Decimal(10**15), "E": Decimal(10**18),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}  # fmt: skip
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity in base units (bytes, cores); ValueError when it is not one."""
    match = _QUANTITY.match(text)
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""]


def format_bytes(value: Decimal) -> str:
    """Bytes as the largest binary suffix that divides them (320Gi, 1536Mi, or plain bytes)."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIX[suffix]
        if value % unit == 0 and value >= unit:
            return f"{int(value // unit)}{suffix}"
    return str(int(value))


def default_memory(spec: AscendInferenceServiceSpec) -> str:
    """The memory request and limit when the spec sets neither: the engine's memory plus /dev/shm."""
    return format_bytes(parse_quantity(DEFAULT_ENGINE_MEMORY) + parse_quantity(spec.runtime.shm_size))


def build_resources(spec: AscendInferenceServiceSpec, npu_resource: str = NPU_RESOURCE) -> dict[str, dict[str, str]]:
    """The engine container's `resources`: the spec's values, defaults for what it leaves unset, the NPUs.

    A request given only as a limit is left for the API server to default (request = limit), as
    Kubernetes does for any container.
    """
    requests = dict(spec.resources.requests)
    limits = dict(spec.resources.limits)
    if "cpu" not in requests and "cpu" not in limits:
        requests["cpu"] = DEFAULT_CPU
    if "memory" not in requests and "memory" not in limits:
        requests["memory"] = default_memory(spec)
    if "memory" not in limits:
        limits["memory"] = requests["memory"]
    npus = str(spec.npus)
    return {"requests": {**requests, npu_resource: npus}, "limits": {**limits, npu_resource: npus}}
