"""Which scheduler binds a service's pods, at what priority, in which Volcano queue: the pod fields and
annotations every pod the operator renders carries (engine pods, both LWS templates, router pods).

Why one helper: the engine pod, the LeaderWorkerSet and the router Deployment are built by three modules,
and a router left to the default scheduler on a Volcano cluster competes with Volcano for the same nodes'
CPU and memory with neither knowing what the other bound. The keys and who reads them: api/scheduling.py.
"""

from ascend_operator.api.scheduling import VOLCANO_QUEUE_ANNOTATION
from ascend_operator.api.spec import AscendInferenceServiceSpec


def scheduling_fields(spec: AscendInferenceServiceSpec) -> dict[str, str]:
    """The pod spec's `schedulerName` and `priorityClassName`, each only when the spec sets it."""
    fields: dict[str, str] = {}
    if spec.scheduling.scheduler_name is not None:
        fields["schedulerName"] = spec.scheduling.scheduler_name
    if spec.priority_class_name is not None:
        fields["priorityClassName"] = spec.priority_class_name
    return fields


def queue_annotations(spec: AscendInferenceServiceSpec) -> dict[str, str]:
    """The Volcano queue annotation (on pods, and on the LeaderWorkerSet for its PodGroups), or none."""
    if spec.scheduling.volcano is None:
        return {}
    return {VOLCANO_QUEUE_ANNOTATION: spec.scheduling.volcano.queue}
