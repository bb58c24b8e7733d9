"""The nodes' liveness as the API server holds it: each node's Ready condition and taints, and its kubelet's
Lease in kube-node-lease, for the lost-node rules (health/node_loss.py). Read-only, two watches.

Why watches and not a read per pass: a health pass runs every scrape interval for each service, and the
answer is the same node for every service on it; an informer per kind (clients/informer.py) lists once and
then follows changes. Why the Lease as well as the node: the kubelet renews its Lease every 10 s and the
node lifecycle controller calls a node Unknown only 50 s after the last renewal
(pkg/controller/nodelifecycle/node_lifecycle_controller.go:952-962), so the Lease tells first, and a fresh
one tells that a node whose Ready condition is stale still has a kubelet. Started with `aisctl operator
--node-loss` (the chart's nodeLoss.enabled grants list and watch of nodes and of the Leases in
kube-node-lease).
"""

import datetime

from kubernetes import client

from ascend_operator.clients.informer import Informer, Obj, Store
from ascend_operator.health.node_loss import NodeState, Taint, silent_since

LEASE_NAMESPACE = "kube-node-lease"


def _epoch(stamp: object) -> float | None:
    """RFC 3339 (a Lease's renewTime is a MicroTime, with fractions) to epoch seconds; None otherwise."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def node_state(node: Obj, lease: Obj | None) -> NodeState:
    """The node and its Lease as the lost-node rules read them."""
    status, spec = node.get("status") or {}, node.get("spec") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    taints = tuple(
        Taint(key=str(t.get("key") or ""), effect=str(t.get("effect") or ""), added=_epoch(t.get("timeAdded")))
        for t in spec.get("taints") or []
    )
    held = (lease or {}).get("spec") or {}
    seconds = held.get("leaseDurationSeconds")
    return NodeState(
        name=str((node.get("metadata") or {}).get("name") or ""),
        ready=None if ready is None else str(ready.get("status")),
        ready_since=None if ready is None else _epoch(ready.get("lastTransitionTime")),
        taints=taints,
        lease_renewed=_epoch(held.get("renewTime")),
        lease_seconds=float(seconds) if isinstance(seconds, int | float) else None,
    )


class NodeLiveness:
    """Watches of the nodes and of their Leases; `state(node)` for the rules, `silent(now)` for the fence."""

    def __init__(self, api: client.ApiClient) -> None:
        core, coordination = client.CoreV1Api(api), client.CoordinationV1Api(api)
        self._nodes, self._leases = Store(index_label=""), Store(index_label="")
        self._informers = [
            Informer(kind="nodes", lister=core.list_node, namespace=None, selector="", store=self._nodes),
            Informer(
                kind="leases",
                lister=lambda **kw: coordination.list_namespaced_lease(LEASE_NAMESPACE, **kw),
                namespace=LEASE_NAMESPACE,
                selector="",
                store=self._leases,
            ),
        ]

    def start(self) -> None:
        """Start both watches (from the event loop)."""
        for informer in self._informers:
            informer.start()

    def stop(self) -> None:
        for informer in self._informers:
            informer.stop()

    @property
    def synced(self) -> bool:
        """Both watches listed once: before that an absent node is not known to be absent."""
        return all(i.synced for i in self._informers)

    def state(self, node: str) -> NodeState | None:
        """The node's state, None when the node does not exist (or the watches have not listed yet)."""
        obj = self._nodes.get("", node)
        return None if obj is None else node_state(obj, self._leases.get(LEASE_NAMESPACE, node))

    def silent(self, *, now: float) -> dict[str, str]:
        """Every node that stopped reporting, node -> why (the fence keeps new engines off them)."""
        found: dict[str, str] = {}
        for obj in self._nodes.values():
            name = str((obj.get("metadata") or {}).get("name") or "")
            if (silence := silent_since(node_state(obj, self._leases.get(LEASE_NAMESPACE, name)), now=now)) is not None:
                found[name] = f"node stopped reporting ({silence[1]})"
        return found
