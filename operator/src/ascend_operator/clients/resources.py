"""The kinds of object the operator touches, what it does with each, and the one interface to do it.

Why a table and not a method per kind: the client (clients/kube.py) and its test double
(tests/fixtures/kube.py) implement five verbs once (get, list, create, patch, delete) over this table,
so a new kind is a row here and not six methods in two places. Why the verbs are in the row: they are
what the Helm chart must grant (tests/helm/test_rbac.py checks every row against the ClusterRole), and
the client refuses a verb its row does not name, so the table cannot drift from the calls.
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
#: subresource), delete. `watch` is not here: the watch caches (clients/caches.py) declare their own.
Verb = str
VERBS: frozenset[Verb] = frozenset({"get", "list", "create", "patch", "status", "delete"})


@dataclass(frozen=True)
class Resource:
    """One kind: where it is served and the verbs the operator uses on it."""

    kind: str
    group: str
    version: str
    plural: str
    verbs: frozenset[Verb]

    def __post_init__(self) -> None:
        if unknown := self.verbs - VERBS:
            raise ValueError(f"{self.kind}: unknown verbs {sorted(unknown)}")

    @property
    def builtin(self) -> bool:
        """Served by Kubernetes itself (strategic merge patches apply); else a custom resource (JSON merge)."""
        return self.group in ("", "apps", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io")

    def path(self, namespace: str, name: str | None = None, *, status: bool = False) -> str:
        """The REST path of the collection in `namespace`, of one object, or of its status subresource."""
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        path = f"{base}/namespaces/{namespace}/{self.plural}"
        if name is not None:
            path += f"/{name}"
            if status:
                path += "/status"
        return path

    def grants(self) -> set[tuple[str, str, str]]:
        """(apiGroup, resource, verb) RBAC rules these verbs need."""
        return {
            (self.group, f"{self.plural}/status", "patch") if verb == "status" else (self.group, self.plural, verb)
            for verb in self.verbs
        }


POD = Resource("Pod", "", "v1", "pods", frozenset({"list", "create", "patch", "status", "delete"}))
#: `delete`: a service's router Service goes when spec.router does (the engines' Service never does).
SERVICE = Resource("Service", "", "v1", "services", frozenset({"get", "create", "patch", "delete"}))
EVENT = Resource("Event", "", "v1", "events", frozenset({"list"}))
#: `get` on one named Secret only: the operator never lists Secrets (the chart may pin the names).
SECRET = Resource("Secret", "", "v1", "secrets", frozenset({"get"}))
PDB = Resource(
    "PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", frozenset({"get", "create", "patch", "delete"})
)
NETWORK_POLICY = Resource(
    "NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies", frozenset({"get", "create", "patch", "delete"})
)
#: create / patch / delete: a disaggregated service's two role services (controller/pd.py).
SERVICE_CR = Resource(KIND, GROUP, VERSION, PLURAL, frozenset({"get", "create", "patch", "delete", "status"}))
LWS = Resource(LWS_KIND, LWS_GROUP, LWS_VERSION, LWS_PLURAL, frozenset({"get", "create", "patch", "delete"}))
POOL = Resource(POOL_KIND, POOL_GROUP, POOL_VERSION, POOL_PLURAL, frozenset({"get", "create", "patch", "delete"}))

#: A service's router (spec.router, render/router.py): its Deployment, identity and discovery rights.
DEPLOYMENT = Resource("Deployment", "apps", "v1", "deployments", frozenset({"get", "create", "patch", "delete"}))
SERVICE_ACCOUNT = Resource("ServiceAccount", "", "v1", "serviceaccounts", frozenset({"get", "create", "delete"}))
ROLE = Resource("Role", "rbac.authorization.k8s.io", "v1", "roles", frozenset({"get", "create", "patch", "delete"}))
ROLE_BINDING = Resource(
    "RoleBinding", "rbac.authorization.k8s.io", "v1", "rolebindings", frozenset({"get", "create", "patch", "delete"})
)

#: An HPA that scales a service with spec.autoscaling too (controller/autoscaling.py names it, never fights it).
HPA = Resource("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers", frozenset({"list"}))

#: The service's earlier specs (controller/revisions.py): listed, created and pruned beyond the history limit.
CONTROLLER_REVISION = Resource(
    "ControllerRevision", "apps", "v1", "controllerrevisions", frozenset({"list", "create", "delete"})
)

RESOURCES: tuple[Resource, ...] = (
    POD, SERVICE, EVENT, SECRET, PDB, NETWORK_POLICY, SERVICE_CR, LWS, POOL,
    DEPLOYMENT, SERVICE_ACCOUNT, ROLE, ROLE_BINDING, HPA, CONTROLLER_REVISION,
)  # fmt: skip
BY_KIND: Mapping[str, Resource] = {r.kind: r for r in RESOURCES}


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
