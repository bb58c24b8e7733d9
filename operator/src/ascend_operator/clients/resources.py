"""The kinds of object the operator touches, what it does with each, and the one interface to do it.

Why a table and not a method per kind: the client (clients/kube.py) and its test double
(tests/fixtures/kube.py) implement five verbs once (get, list, create, patch, delete) over this table,
the watch caches (clients/caches.py) hold the rows marked `cached`, and the Helm chart's rules for these
kinds are generated from the rows (clients/rbac.py, `make crd`; a test fails on drift), so a new kind is a
row here and nothing else. Why the verbs are in the row: the client refuses a verb its row does not name,
so what the chart grants cannot drift from the calls.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ascend_operator.api.constants import (
    GROUP,
    KIND,
    LABEL_SERVICE,
    LWS_GROUP,
    LWS_KIND,
    LWS_PLURAL,
    LWS_VERSION,
    PLURAL,
    POOL_GROUP,
    POOL_KIND,
    POOL_PLURAL,
    POOL_VERSION,
    VERSION,
)

#: What the operator may do with a kind: get, list, create, patch (the object), status (patch its status
#: subresource), delete. `watch` is not a verb of the client: a row that is `cached` is listed and watched
#: by the watch caches (clients/caches.py), and kopf's own calls are in `kopf`.
Verb = str
VERBS: frozenset[Verb] = frozenset({"get", "list", "create", "patch", "status", "delete"})
#: Verbs kopf uses for the operator (granted by the chart, never sent by `Kube`).
KOPF_VERBS: frozenset[Verb] = frozenset({"list", "watch", "create"})
#: The order the chart lists verbs in (RBAC does not care; reviewers do).
VERB_ORDER = ("get", "list", "watch", "create", "patch", "delete")


@dataclass(frozen=True)
class Resource:
    """One kind: where it is served, the verbs the operator uses on it, and what the chart must grant.

    The chart's rules for these kinds are generated from the rows (`make crd`, clients/rbac.py) with `why`
    as their comment and `gate` as the chart value they depend on, so a new kind is one row here."""

    kind: str
    group: str
    version: str
    plural: str
    verbs: frozenset[Verb]
    why: str = ""
    """What the operator does with the kind and where (the chart's comment above its rule)."""
    cached: bool = False
    """Listed and watched by the watch caches (clients/caches.py) and read from them."""
    kopf: frozenset[Verb] = frozenset()
    """Verbs kopf uses on the kind for the operator (watching the custom resource, posting events)."""
    gate: str = ""
    """The chart value (`router.enabled`) without which the operator never touches the kind; "" = always."""
    verb_gates: tuple[tuple[Verb, str], ...] = ()
    """Verbs needed only with a chart value on (the router's Service is the only Service ever deleted)."""
    templated: bool = False
    """The chart writes this kind's rule itself from its values (Secrets: by name), not from the row."""

    def __post_init__(self) -> None:
        if unknown := self.verbs - VERBS:
            raise ValueError(f"{self.kind}: unknown verbs {sorted(unknown)}")
        if unknown := self.kopf - KOPF_VERBS:
            raise ValueError(f"{self.kind}: kopf does not use {sorted(unknown)}")
        if stray := {verb for verb, _ in self.verb_gates} - self.verbs:
            raise ValueError(f"{self.kind}: verb_gates names verbs not in its row: {sorted(stray)}")

    @property
    def builtin(self) -> bool:
        """Served by Kubernetes itself (strategic merge patches apply); else a custom resource (JSON merge)."""
        return self.group in ("", "apps", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io")

    def collection(self, namespace: str | None) -> str:
        """The REST path of the collection in `namespace`, or in every namespace (None)."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        return f"{base}/{self.plural}" if namespace is None else f"{base}/namespaces/{namespace}/{self.plural}"

    def path(self, namespace: str, name: str | None = None, *, status: bool = False) -> str:
        """The REST path of the collection in `namespace`, of one object, or of its status subresource."""
        path = self.collection(namespace)
        if name is not None:
            path += f"/{name}"
            if status:
                path += "/status"
        return path

    def rbac_verbs(self, *, status: bool = False) -> frozenset[Verb]:
        """The RBAC verbs on the kind (or, `status`, on its status subresource), kopf's and the caches' included."""
        if status:
            return frozenset({"patch"}) if "status" in self.verbs else frozenset()
        cache = {"list", "watch"} if self.cached else set()
        return frozenset((self.verbs - {"status"}) | self.kopf | cache)

    def grants(self) -> set[tuple[str, str, str]]:
        """(apiGroup, resource, verb) RBAC rules the row needs, every gate on."""
        main = {(self.group, self.plural, verb) for verb in self.rbac_verbs()}
        return main | {(self.group, f"{self.plural}/status", verb) for verb in self.rbac_verbs(status=True)}


POD = Resource(
    "Pod", "", "v1", "pods", frozenset({"list", "create", "patch", "status", "delete"}),
    why="Engine pods: created for missing replicas, patched with the drain start and drift-baseline "
    "annotations a restarted operator reads back, deleted (uid precondition) for stale specs and rolls; "
    "their status carries the readiness gate inference.ascend.dev/engine-ready (controller/monitor.py).",
    cached=True,
)  # fmt: skip
SERVICE = Resource(
    "Service", "", "v1", "services", frozenset({"get", "create", "patch", "delete"}),
    why="The Service in front of a service's engines (and its router's); a router's Service is deleted when "
    "spec.router goes (the engines' Service never is).",
    cached=True,
    verb_gates=(("delete", "router.enabled"),),
)  # fmt: skip
EVENT = Resource(
    "Event", "", "v1", "events", frozenset({"list"}),
    why="Events on AscendInferenceServices: kopf posts core v1 events (kopf/_cogs/clients/events.py); list: "
    "the FailedMount events of a pod stuck before its containers (the pod status does not say why).",
    kopf=frozenset({"create"}),
)  # fmt: skip
#: `get` on one named Secret only: the operator never lists Secrets (the chart pins the names: rbac.yaml).
SECRET = Resource(
    "Secret", "", "v1", "secrets", frozenset({"get"}),
    why="Engine API keys by name (clients/secrets.py).",
    templated=True,
)  # fmt: skip
PDB = Resource(
    "PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", frozenset({"get", "create", "patch", "delete"}),
    why="The PodDisruptionBudget of a service's engine pods (minAvailable); deleted when "
    "spec.disruptionBudget.enabled is turned off (only one the service owns).",
    cached=True,
)  # fmt: skip
NETWORK_POLICY = Resource(
    "NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies", frozenset({"get", "create", "patch", "delete"}),
    why="The NetworkPolicy in front of each service's engines; deleted when spec.networkPolicy is turned off.",
    cached=True,
)  # fmt: skip
SERVICE_CR = Resource(
    KIND, GROUP, VERSION, PLURAL, frozenset({"get", "create", "patch", "delete", "status"}),
    why="The custom resource: kopf lists and watches it (one reconcile and one health daemon per service); "
    "patched for the finalizer, progress annotations and status; a disaggregated service's two role services "
    "are created, patched and deleted (controller/disaggregation.py).",
    kopf=frozenset({"list", "watch"}),
)  # fmt: skip
LWS = Resource(
    LWS_KIND, LWS_GROUP, LWS_VERSION, LWS_PLURAL, frozenset({"get", "create", "patch", "delete"}),
    why="Multi-node services (spec.parallelism.nodes > 1) are one LeaderWorkerSet each (render/lws.py); "
    "deleted when the service goes back to one node.",
    gate="multiNode.enabled",
)  # fmt: skip
POOL = Resource(
    POOL_KIND, POOL_GROUP, POOL_VERSION, POOL_PLURAL, frozenset({"get", "create", "patch", "delete"}),
    why="InferencePools of services with spec.routing.inferencePool (controller/inference_pool.py); deleted when "
    "routing is turned off (only a pool the service owns, by uid).",
    gate="routing.inferencePool.enabled",
)  # fmt: skip

#: A service's router (spec.router, render/router.py): its Deployment, identity and discovery rights.
DEPLOYMENT = Resource(
    "Deployment", "apps", "v1", "deployments", frozenset({"get", "create", "patch", "delete"}),
    why="A service's router Deployment (spec.router, controller/owned.py).",
    gate="router.enabled",
)  # fmt: skip
SERVICE_ACCOUNT = Resource(
    "ServiceAccount", "", "v1", "serviceaccounts", frozenset({"get", "create", "delete"}),
    why="The router pods' identity (render/router.py).",
    gate="router.enabled",
)  # fmt: skip
ROLE = Resource(
    "Role", "rbac.authorization.k8s.io", "v1", "roles", frozenset({"get", "create", "patch", "delete"}),
    why="The router's discovery rights: list and watch on pods (the operator holds both, so it may grant them).",
    gate="router.enabled",
)  # fmt: skip
ROLE_BINDING = Resource(
    "RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", frozenset({"get", "create", "patch", "delete"}),
    why="The binding of the router's Role to its ServiceAccount.",
    gate="router.enabled",
)  # fmt: skip

HPA = Resource(
    "HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers", frozenset({"list"}),
    why="An HPA that scales a service with spec.autoscaling too is named, never fought (controller/autoscaling.py).",
)  # fmt: skip

#: The service's earlier specs (controller/revisions.py).
CONTROLLER_REVISION = Resource(
    "ControllerRevision", "apps", "v1", "controllerrevisions", frozenset({"list", "create", "delete"}),
    why="A service's engine specs, one ControllerRevision each (controller/revisions.py): listed for rollbacks "
    "and `aisctl rollout`, created on a spec change, pruned beyond spec.rollout.revisionHistoryLimit.",
)  # fmt: skip

RESOURCES: tuple[Resource, ...] = (
    SERVICE_CR, POD, SERVICE, NETWORK_POLICY, SECRET, PDB, EVENT, HPA, CONTROLLER_REVISION,
    DEPLOYMENT, SERVICE_ACCOUNT, ROLE, ROLE_BINDING, LWS, POOL,
)  # fmt: skip
BY_KIND: Mapping[str, Resource] = {r.kind: r for r in RESOURCES}
#: The kinds the watch caches hold (clients/caches.py).
CACHED: tuple[Resource, ...] = tuple(r for r in RESOURCES if r.cached)


def resource_of(body: Mapping[str, Any]) -> Resource:
    """The row of a rendered object, by its `kind`."""
    try:
        return BY_KIND[body["kind"]]
    except KeyError:
        raise ValueError(f"the operator does not manage objects of kind {body.get('kind')!r}") from None


Patch = Mapping[str, Any] | Sequence[Mapping[str, Any]]
"""An object patch (strategic merge on built-in kinds, JSON merge on custom ones) or a JSON patch (a list
of operations)."""


class Kube(Protocol):
    """The five verbs, over any kind of `RESOURCES`. Objects are plain dicts, camelCase as the API server
    sends them. "Gone" (404) and "moved on" (409 on a precondition) are answers, not errors, which is what
    makes each reconcile step idempotent; a refusal raises `ApiRefused`, anything transient
    `kopf.TemporaryError`, and a create of a kind the API server does not serve `NotServed`."""

    async def get(self, res: Resource, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        """The object, or None. Cached kinds answer from their watch cache unless `fresh`."""
        ...

    async def list(
        self, res: Resource, namespace: str, *, labels: Mapping[str, str] | None = None, fields: str = ""
    ) -> list[dict[str, Any]]:
        """The objects in `namespace` with these labels (and field selector)."""
        ...

    async def create(self, body: Mapping[str, Any]) -> bool:
        """Create the object; False when one of that name exists already (a retried create)."""
        ...

    async def patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        patch: Patch,
        *,
        status: bool = False,
        resource_version: str | None = None,
    ) -> dict[str, Any] | None:
        """Patch the object (or, with `status`, its status); the object as written, or None when it is
        gone or, with `resource_version`, when it has moved past that version (409: re-read, decide again)."""
        ...

    async def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        grace_seconds: int | None = None,
        foreground: bool = False,
    ) -> bool:
        """Delete the object if it is still the one meant (`uid` precondition); False when already gone.
        `grace_seconds` overrides a pod's terminationGracePeriodSeconds; `foreground` deletes dependents
        first (a LeaderWorkerSet's groups)."""
        ...


async def service_pods(kube: Kube, namespace: str, service: str) -> list[dict[str, Any]]:
    """The engine pods of one service (every pod the operator renders carries its service label)."""
    return await kube.list(POD, namespace, labels={LABEL_SERVICE: service})
