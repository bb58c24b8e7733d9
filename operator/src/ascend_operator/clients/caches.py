"""The operator's watch caches: its services' pods, Services, PodDisruptionBudgets and NetworkPolicies.

Why one place: the kinds, the server-side selector and the namespaces the operator watches are decided
once here, and `KubeApi` reads through them (clients/kube.py). Everything the operator renders carries
the `inference.ascend.dev/service` label (render/pod.py common_labels), so that label is both the watch
selector (nothing else in the cluster is sent) and the index a pass reads its service's objects by.
With `aisctl operator -n NS` the caches watch those namespaces only (a kopf glob pattern watches every
namespace: the API server filters by name only).
"""

import functools
from collections.abc import Callable, Sequence

from kubernetes import client

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.clients.informer import Informer, Lister, Obj, Store


def _scoped(all_namespaces: Lister, namespaced: Lister, namespaces: Sequence[str]) -> list[tuple[str | None, Lister]]:
    if not namespaces or any(any(c in ns for c in "*?[!") for ns in namespaces):
        return [(None, all_namespaces)]
    return [(ns, functools.partial(namespaced, ns)) for ns in namespaces]


class Caches:
    """One store per kind, filled by an informer per watched namespace (or one for all)."""

    def __init__(self, api: client.ApiClient, *, namespaces: Sequence[str] = ()) -> None:
        core, policy, net = client.CoreV1Api(api), client.PolicyV1Api(api), client.NetworkingV1Api(api)
        kinds: list[tuple[str, str, Lister, Lister]] = [  # (kind, resource, list everywhere, list in one)
            ("Pod", "pods", core.list_pod_for_all_namespaces, core.list_namespaced_pod),
            ("Service", "services", core.list_service_for_all_namespaces, core.list_namespaced_service),
            (
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                policy.list_pod_disruption_budget_for_all_namespaces,
                policy.list_namespaced_pod_disruption_budget,
            ),
            (
                "NetworkPolicy",
                "networkpolicies",
                net.list_network_policy_for_all_namespaces,
                net.list_namespaced_network_policy,
            ),
        ]
        self._stores = {kind: Store(index_label=LABEL_SERVICE) for kind, *_ in kinds}
        self.specs = [  # (kind, resource, namespace or None for all, list call)
            (kind, resource, namespace, lister)
            for kind, resource, every, one in kinds
            for namespace, lister in _scoped(every, one, namespaces)
        ]
        self._informers: dict[str, list[Informer]] = {}

    def start(self, on_change: Callable[[Obj], None]) -> None:
        """Start every informer; `on_change(obj)` runs on the event loop after a store took a change."""
        for kind, resource, namespace, lister in self.specs:
            informer = Informer(
                kind=resource,
                lister=lister,
                namespace=namespace,
                selector=LABEL_SERVICE,
                store=self._stores[kind],
                on_change=on_change,
            )
            informer.start()
            self._informers.setdefault(kind, []).append(informer)

    def store(self, kind: str) -> Store | None:
        """The store of a kind by its `kind` name (Pod, Service, PodDisruptionBudget, NetworkPolicy)."""
        return self._stores.get(kind)

    def stop(self) -> None:
        """Ask every informer to end."""
        for informers in self._informers.values():
            for informer in informers:
                informer.stop()

    def synced(self, kind: str) -> bool:
        """Whether every informer filling the store of `kind` has listed once (then its absences are true too)."""
        informers = self._informers.get(kind, [])
        return bool(informers) and all(i.synced for i in informers)
