"""Node fitness: the NPU driver version and chip an engine requires, as node affinity. Pure.

Why the operator renders a list of versions: the Ascend device plugin labels a node with its driver's
version string (`huawei.com/driver.version`, ascend-device-plugin pkg/common/constants.go:362, written by
server/manager.go:304-309) and its chip (`node.kubernetes.io/npu.chip.name`, constants.go:102), and the
scheduler's node affinity compares numbers only (Gt/Lt), not versions such as 24.1.rc2. So the operator
reads the versions present on the cluster's nodes and requires `In` those that meet the minimum. Placement
stays the scheduler's: a node that already meets a requirement is never passed over.

A node MindCluster takes out whole (NodeD's UnHealthy, or most of its chips faulty: health/chips.py) is kept
off a new engine pod by name (`matchFields metadata.name NotIn`): the device plugin removes from the node's
allocatable only the chips it sees failing itself, so a node NodeD isolates for an IPMI-reported fault keeps
its 8 NPUs allocatable, and the successor of the pod rolled off it would land right back on it.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ascend_operator.api.constants import CHIP_NAME_LABEL, DRIVER_VERSION_LABEL, GROUP
from ascend_operator.api.spec import AscendInferenceServiceSpec

DRIVER_LABEL = DRIVER_VERSION_LABEL
CHIP_LABEL = CHIP_NAME_LABEL
#: The `In` value when no node meets the minimum: a valid label value no plugin writes, so the pod stays
#: Pending (and its status says why) instead of landing on a node that does not fit.
NO_VERSION = "none-meets-the-minimum"
#: A part of a driver version as the plugin's label carries it: the raw `dcmi_get_dcmi_version` string
#: (ascend-device-plugin server/manager.go:304-306, devmanager/dcmi/dcmi.go:2265-2272), e.g. 24.1.rc3,
#: 26.0.RC1 (upper-case rc) or 24.1.rc3.b060 (a build of that rc).
_PART = re.compile(r"^(rc)?([0-9]+)$", re.IGNORECASE)
_BUILD = re.compile(r"^b([0-9]+)$", re.IGNORECASE)


def version_key(version: str) -> tuple[int, ...] | None:
    """A comparable key for a driver version (24.1.rc2 < 24.1.rc2.b060 < 24.1.0 < 24.1.1 < 25.5.1); None when
    it is not one. An rc (any case) precedes the release of the same numbers; a last `bNNN` part is a build of
    what precedes it, later than that version without one."""
    parts = version.split(".")
    build = _BUILD.match(parts[-1]) if len(parts) > 3 else None  # a build of a whole version (x.y.z.bNNN)
    if build is not None:
        parts = parts[:-1]
    if len(parts) < 2:
        return None
    key: list[int] = []
    for part in parts:
        match = _PART.match(part)
        if match is None:
            return None
        rc, number = match.groups()
        key += [0 if rc else 1, int(number)]
    return tuple(key) + ((2, int(build.group(1))) if build is not None else ())


def meets(version: str, minimum: str) -> bool:
    have, want = version_key(version), version_key(minimum)
    return have is not None and want is not None and have >= want


@dataclass(frozen=True)
class NodeFacts:
    """What the device plugin's (and the model_stage role's) labels say of one node."""

    name: str
    driver: str | None
    chip: str | None
    labels: Mapping[str, str] = field(default_factory=dict)


def staged_label(spec: AscendInferenceServiceSpec) -> tuple[str, str] | None:
    """(label, value) the model_stage role puts on nodes holding spec.model's weights, None when not asked."""
    source = spec.model.source.host_path
    staged = source.staged if source is not None else None
    if staged is None:
        return None
    return f"{GROUP}/model-{staged.name}", staged.manifest_digest


def allowed_versions(spec: AscendInferenceServiceSpec, nodes: Iterable[NodeFacts]) -> tuple[str, ...] | None:
    """The driver versions on the cluster's nodes that meet spec.runtime.minDriverVersion; None without one."""
    minimum = spec.runtime.min_driver_version
    if minimum is None:
        return None
    return tuple(sorted({n.driver for n in nodes if n.driver is not None and meets(n.driver, minimum)}))


def fitness_terms(spec: AscendInferenceServiceSpec, versions: Sequence[str] | None) -> list[dict[str, Any]]:
    """The node-selector requirements spec.runtime adds (empty when it asks nothing)."""
    terms: list[dict[str, Any]] = []
    if spec.runtime.chip_name is not None:
        terms.append({"key": CHIP_LABEL, "operator": "In", "values": [spec.runtime.chip_name]})
    if spec.runtime.min_driver_version is not None:
        terms.append({"key": DRIVER_LABEL, "operator": "In", "values": list(versions or ()) or [NO_VERSION]})
    if (staged := staged_label(spec)) is not None:
        terms.append({"key": staged[0], "operator": "In", "values": [staged[1]]})
    return terms


def with_fitness(
    affinity: dict[str, Any] | None, terms: list[dict[str, Any]], *, avoid_nodes: Sequence[str] = ()
) -> dict[str, Any] | None:
    """`affinity` (spec.scheduling.affinity) with `terms` ANDed into every required node-selector term (a
    new term when there is none), and the nodes in `avoid_nodes` excluded by name; the user's own terms are
    kept as they are."""
    if not terms and not avoid_nodes:
        return affinity
    merged = dict(affinity or {})
    node = dict(merged.get("nodeAffinity") or {})
    required = dict(node.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    selector_terms = [dict(t) for t in required.get("nodeSelectorTerms") or [{}]]
    # one requirement per node: the API server refuses a field selector's NotIn with more than one value
    # (pkg/apis/core/validation validateNodeFieldSelectorRequirement: "must be only one value when `operator`
    # is 'In' or 'NotIn' for node field selector"); the requirements of a term are ANDed
    fence = [{"key": "metadata.name", "operator": "NotIn", "values": [node]} for node in sorted(set(avoid_nodes))]
    for term in selector_terms:
        if terms:
            term["matchExpressions"] = [*(term.get("matchExpressions") or []), *terms]
        if fence:
            term["matchFields"] = [*(term.get("matchFields") or []), *fence]
    required["nodeSelectorTerms"] = selector_terms
    node["requiredDuringSchedulingIgnoredDuringExecution"] = required
    merged["nodeAffinity"] = node
    return merged


def asks_placement(spec: AscendInferenceServiceSpec) -> bool:
    """Whether the spec requires anything of a node beyond NPUs: a chip, a driver version, a staged model."""
    runtime = spec.runtime
    return runtime.chip_name is not None or runtime.min_driver_version is not None or staged_label(spec) is not None


def unfit(spec: AscendInferenceServiceSpec, nodes: Sequence[NodeFacts]) -> str | None:
    """Which of spec.runtime's requirements no node meets, with what the nodes have; None when some node
    meets them all (whether it has free NPUs is the scheduler's message)."""
    if not asks_placement(spec):
        return None
    chip, minimum, staged = spec.runtime.chip_name, spec.runtime.min_driver_version, staged_label(spec)
    fitting = [
        n
        for n in nodes
        if (chip is None or n.chip == chip)
        and (minimum is None or (n.driver is not None and meets(n.driver, minimum)))
        and (staged is None or n.labels.get(staged[0]) == staged[1])
    ]
    if fitting:
        return None
    asked = [f"{CHIP_LABEL}={chip}"] if chip else []
    asked += [f"{DRIVER_LABEL} >= {minimum}"] if minimum else []
    asked += [f"the staged model {staged[0]}={staged[1]} (playbooks/stage-model.yml)"] if staged else []
    seen = sorted({f"{n.chip or '?'}/{n.driver or '?'}" for n in nodes})
    have = f"nodes have (chip/driver): {', '.join(seen)}" if seen else "no node carries the device plugin's labels"
    return f"no node meets the placement requirements: {' and '.join(asked)}; {have}"


def fenced(unhealthy: Mapping[str, str]) -> str | None:
    """What a Pending pod waits for when nodes are kept off new engines (`unhealthy`: node -> why); None when
    no node is."""
    if not unhealthy:
        return None
    why = "; ".join(unhealthy[n] for n in sorted(unhealthy))
    nodes = ", ".join(sorted(unhealthy))
    return f"kept off node(s) {nodes} ({why}): waiting for free NPUs on another node"
