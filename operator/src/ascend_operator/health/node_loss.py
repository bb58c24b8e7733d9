"""Lost nodes: when to give up on a pod whose node stopped reporting. Pure.

Why: a pod on a node whose kubelet is gone is never finished by anyone. Deleting it (a roll, or Kubernetes'
own taint eviction after 300 s) only sets its deletionTimestamp; the kubelet that would stop the containers
and confirm is the thing that is gone, so the pod stays Terminating and keeps its replica slot (and a
LeaderWorkerSet group's fixed pod names) until the node returns, which for a dead server is never.
MindCluster's infer-operator force-deletes (grace 0) the pods it manages on a node as soon as the node is
not Ready (Ascend/mind-cluster 22bb3d98, component/infer-operator/pkg/controller/nodepodcleaner/
node_pod_cleaner_controller.go:18-19, 61-77, 96-111, 140); Kubernetes offers the
`node.kubernetes.io/out-of-service` taint for an administrator to say the same (k8s.io/api v0.37.2
core/v1/well_known_taints.go:49-51; podgc then force-deletes the node's terminating pods). This operator
does it per pod, after spec.health.nodeLostSeconds, and only when the engine does not answer either.

How a node goes silent in Kubernetes (v1.37.2, the version hack/build-k8s.sh builds):
- the kubelet renews its Lease in kube-node-lease every 10 s with leaseDurationSeconds 40
  (pkg/kubelet/apis/config/v1beta1/defaults.go:149-150): a Lease older than renewTime + leaseDurationSeconds
  means the kubelet stopped;
- the node lifecycle controller takes a Lease renewal as the node's heartbeat and, after
  node-monitor-grace-period (50 s, pkg/controller/nodelifecycle/config/v1alpha1/defaults.go:45-46) without
  one, sets the Ready condition Unknown (pkg/controller/nodelifecycle/node_lifecycle_controller.go:952-962);
- it taints Ready False with node.kubernetes.io/not-ready and Ready Unknown with
  node.kubernetes.io/unreachable (same file :91-95; the keys: core/v1/well_known_taints.go:20-27).
The earliest of these signals is when the node went silent. A Lease renewed within its duration means a
kubelet that reports: such a node is live, and a pod slow to terminate there is the kubelet's business,
never forced (unless an administrator put the out-of-service taint on it).

The chain (`CHAIN`): rules `(NodeLossInput) -> (reason, message, failed)`; a rule with nothing to say
returns `PASS`, the first that says something decides; `failed` True only for the last one: the pod is lost.
"""

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ascend_operator.disruption.model import RollReason

TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
#: The taints that say the node's kubelet does not report (not-ready is also Ready False, said by the kubelet
#: itself: it counts through the condition, not the taint).
SILENT_TAINTS = (TAINT_UNREACHABLE, TAINT_OUT_OF_SERVICE)


@dataclass(frozen=True, kw_only=True)
class Taint:
    key: str
    effect: str = ""
    added: float | None = None
    """timeAdded (epoch seconds), None when the taint does not say."""


@dataclass(frozen=True, kw_only=True)
class NodeState:
    """What the API server holds about one node: its Ready condition, taints and Lease. Epoch seconds."""

    name: str
    ready: str | None = None
    """The Ready condition's status ("True", "False", "Unknown"); None when the node has none."""
    ready_since: float | None = None
    """The Ready condition's lastTransitionTime."""
    taints: tuple[Taint, ...] = ()
    lease_renewed: float | None = None
    """The Lease's spec.renewTime; None without a Lease (a cluster or a kubelet that uses none)."""
    lease_seconds: float | None = None
    """The Lease's spec.leaseDurationSeconds."""

    @property
    def lease_expires(self) -> float | None:
        if self.lease_renewed is None or self.lease_seconds is None:
            return None
        return self.lease_renewed + self.lease_seconds

    def lease_fresh(self, now: float) -> bool:
        """The kubelet renewed its Lease within the Lease's duration: it reports."""
        expires = self.lease_expires
        return expires is not None and now <= expires


def silent_since(node: NodeState, *, now: float) -> tuple[float, str] | None:
    """When the node went silent and the evidence, from the earliest of its signals; None while it reports
    (Ready True, no unreachable or out-of-service taint, its Lease fresh or absent). A Lease renewed within
    its duration outweighs a Ready condition not yet updated, as the node lifecycle controller counts it."""
    signals: list[tuple[float, str]] = []
    out_of_service = [t for t in node.taints if t.key == TAINT_OUT_OF_SERVICE]
    if node.lease_fresh(now) and not out_of_service:
        return None
    if node.ready in ("False", "Unknown"):
        signals.append((node.ready_since if node.ready_since is not None else now, f"Ready {node.ready}"))
    for taint in node.taints:
        if taint.key in SILENT_TAINTS:
            signals.append((taint.added if taint.added is not None else now, f"taint {taint.key}:{taint.effect}"))
    expires = node.lease_expires
    if expires is not None and now > expires:
        signals.append((expires, f"Lease not renewed since {now - (node.lease_renewed or now):.0f}s"))
    if not signals:
        return None
    since = min(t for t, _ in signals)
    return since, ", ".join(why for _, why in sorted(signals))


@dataclass(frozen=True, kw_only=True)
class NodeLossInput:
    """One pod (or one member of a group) and its node, as the rules see it."""

    pod: str
    node_name: str | None
    """spec.nodeName; None while the pod is not scheduled."""
    node: NodeState | None
    """The node as the API server holds it; None when no such node exists (deleted)."""
    answering: bool
    """The operator's last scrape of the pod's engine got an answer (a group's worker serves no API: False)."""
    now: float
    window: float
    """spec.health.nodeLostSeconds."""

    @functools.cached_property
    def silence(self) -> tuple[float, str] | None:
        """`silent_since` of the node at `now`, read once for every rule (None: it reports, or no node)."""
        return None if self.node is None else silent_since(self.node, now=self.now)


Verdict = tuple[str, str, bool]
Rule = Callable[[NodeLossInput], Verdict]
PASS: Verdict = ("", "", False)


def not_scheduled(i: NodeLossInput) -> Verdict:
    """A pod on no node has no node to lose (the scheduler's business)."""
    return ("NotScheduled", f"pod {i.pod} is on no node", False) if not i.node_name else PASS


def node_deleted(i: NodeLossInput) -> Verdict:
    """A deleted node's pods are podgc's: it force-deletes them after a 40 s quarantine
    (pkg/controller/podgc/gc_controller.go:49-51, gcOrphaned)."""
    if i.node is None:
        return "NodeDeleted", f"node {i.node_name} of pod {i.pod} no longer exists (podgc removes its pods)", False
    return PASS


def engine_answers(i: NodeLossInput) -> Verdict:
    """An engine that answers is reachable, whatever its node's kubelet says: it serves, the health loop
    judges it."""
    return ("EngineAnswers", f"the engine of pod {i.pod} answers", False) if i.answering else PASS


def node_reports(i: NodeLossInput) -> Verdict:
    """A node that reports is live: a pod slow to terminate there is never forced."""
    assert i.node is not None
    if i.silence is None:
        return "NodeReports", f"node {i.node.name} reports (Ready {i.node.ready or 'unset'}, Lease fresh)", False
    return PASS


def within_window(i: NodeLossInput) -> Verdict:
    """Silent for less than spec.health.nodeLostSeconds: a kubelet restart or a short partition comes back."""
    assert i.node is not None
    assert i.silence is not None
    since, why = i.silence
    if i.now - since < i.window:
        message = f"node {i.node.name} silent for {i.now - since:.0f}s ({why}); gives up at {i.window:.0f}s"
        return "NodeSilent", message, False
    return PASS


def lost(i: NodeLossInput) -> Verdict:
    """Silent past the window and the engine unreachable: the pod is given up."""
    assert i.node is not None
    assert i.silence is not None
    since, why = i.silence
    message = (
        f"node {i.node.name} silent for {i.now - since:.0f}s ({why}) and the engine of pod {i.pod} does not "
        f"answer: no kubelet will finish it"
    )
    return RollReason.NODE_LOST.value, message, True


#: In order; the first rule with something to say decides.
CHAIN: tuple[Rule, ...] = (not_scheduled, node_deleted, engine_answers, node_reports, within_window, lost)


def judge_node_loss(i: NodeLossInput, chain: Sequence[Rule] = CHAIN) -> Verdict:
    """The verdict of the first rule of `chain` with something to say (the last always has)."""
    for rule in chain:
        verdict = rule(i)
        if verdict != PASS:
            return verdict
    return PASS
