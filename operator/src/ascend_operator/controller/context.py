"""What a reconcile pass may do, injected: the Kubernetes client, the event sink, the clocks and what the
operator reads of the nodes. Its own module so the reconcile pass (controller/reconcile.py) and its engine
step (controller/engines.py) share it without importing each other."""

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ascend_operator.api.constants import NPU_RESOURCE
from ascend_operator.clients.resources import Kube
from ascend_operator.clients.secrets import ApiKeyCache
from ascend_operator.controller.service_state import EventSink
from ascend_operator.controller.status import DEFAULT_LIVE_INTERVAL
from ascend_operator.render.fitness import NodeFacts
from ascend_operator.render.netpol import OperatorPeer


@dataclass(frozen=True, kw_only=True)
class Context:
    """The I/O a pass may do, injected."""

    kube: Kube
    events: EventSink
    now: Callable[[], str]
    npu_resource: str = NPU_RESOURCE
    """The device plugin's NPU resource name (`aisctl operator --npu-resource`)."""
    operator: OperatorPeer = field(default_factory=OperatorPeer)
    """The operator's own pods, admitted by every service's NetworkPolicy."""
    keys: ApiKeyCache | None = None
    """API keys, for the version of a service's key Secret (a rotation replaces its engines)."""
    clock: Callable[[], float] = time.time
    """Wall-clock epoch seconds, for disruption decisions."""
    mono: Callable[[], float] = time.monotonic
    """Monotonic seconds, for how old the last status write is."""
    live_interval: float = DEFAULT_LIVE_INTERVAL
    """Seconds between status writes that change only the live engine figures (`status.LIVE_KEYS`)."""
    nodes: Callable[[], list[NodeFacts]] | None = None
    """The NPU nodes' driver versions and chips (`--npu-faults`), for spec.runtime's placement requirements;
    None: the operator does not read nodes."""
    unhealthy_nodes: Callable[[], Mapping[str, str]] | None = None
    """Nodes MindCluster takes out whole, node -> why (`--npu-faults`; health/chips.py `keep_off`: NodeD UnHealthy
    or PreSeparate, most chips faulty): new engine pods are kept off them. None: the operator does not read the
    reports."""
