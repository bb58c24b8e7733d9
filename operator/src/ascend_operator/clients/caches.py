"""The operator's watch caches: the kinds of clients/resources.py marked `cached` (its services' pods,
Services, PodDisruptionBudgets and NetworkPolicies).

Why one place: the kinds come from the one table (a row marked `cached`; the chart grants it list and
watch from the same row), the server-side selector and the namespaces the operator watches are decided
once here, and `KubeApi` reads through them (clients/kube.py). Everything the operator renders carries
the `inference.ascend.dev/service` label (render/pod.py common_labels), so that label is both the watch
selector (nothing else in the cluster is sent) and the index a pass reads its service's objects by.
With `aisctl operator -n NS` the caches watch those namespaces only (a kopf glob pattern watches every
namespace: the API server filters by name only).
"""

from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.clients.informer import Informer, Lister, Obj, Store
from ascend_operator.clients.resources import CACHED, Resource


def _every(namespaces: Sequence[str]) -> bool:
    """Whether the caches must watch every namespace (none named, or a kopf glob pattern among them)."""
    return not namespaces or any(any(c in ns for c in "*?[!") for ns in namespaces)


def lister(api: client.ApiClient, res: Resource, namespace: str | None) -> Lister:
    """A list (and, with `watch=True`, watch) call of `res` in `namespace` (None: every namespace) that
    answers the raw HTTP response, as the Kubernetes client's typed list calls do with
    `_preload_content=False`: one call for any row of the table, so a cached kind needs no typed API."""

    def call(
        *,
        label_selector: str,
        watch: bool = False,
        resource_version: str | None = None,
        allow_watch_bookmarks: bool = False,
        timeout_seconds: int | None = None,
        _preload_content: bool = False,
        _request_timeout: Any = None,
    ) -> Any:
        query: list[tuple[str, str]] = [("labelSelector", label_selector)]
        if watch:
            query.append(("watch", "true"))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if allow_watch_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(timeout_seconds)))
        method, url, headers, body, post = api.param_serialize(
            method="GET", resource_path=res.collection(namespace), query_params=query,
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        )  # fmt: skip
        response = api.call_api(method, url, headers, body, post, _request_timeout=_request_timeout)
        if not 200 <= response.status <= 299:
            response.read()  # type: ignore[no-untyped-call]
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    return call


class Caches:
    """One store per cached kind of the table (clients/resources.py `CACHED`), filled by an informer per
    watched namespace (or one for all)."""

    def __init__(
        self, api: client.ApiClient, *, namespaces: Sequence[str] = (), kinds: Sequence[Resource] = CACHED
    ) -> None:
        self._stores = {res.kind: Store(index_label=LABEL_SERVICE) for res in kinds}
        scopes: list[str | None] = [None] if _every(namespaces) else list(namespaces)
        self.specs: list[tuple[Resource, str | None, Lister]] = [  # (row, namespace or None for all, list call)
            (res, namespace, lister(api, res, namespace)) for res in kinds for namespace in scopes
        ]
        self._informers: dict[str, list[Informer]] = {}

    def start(self, on_change: Callable[[Obj], None]) -> None:
        """Start every informer; `on_change(obj)` runs on the event loop after a store took a change."""
        for res, namespace, call in self.specs:
            informer = Informer(
                kind=res.plural,
                lister=call,
                namespace=namespace,
                selector=LABEL_SERVICE,
                store=self._stores[res.kind],
                on_change=on_change,
            )
            informer.start()
            self._informers.setdefault(res.kind, []).append(informer)

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
