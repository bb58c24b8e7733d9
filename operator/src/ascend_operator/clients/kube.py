"""The operator's one Kubernetes client: five verbs over the kinds of clients/resources.py.

The official client is synchronous; each call runs in a worker thread of its own pool so the kopf event
loop never blocks. Requests go through the official client's configuration (auth, TLS, proxy) as plain
REST paths from the resource table, and answers are read as JSON dicts (no model classes).
Errors are translated once: "not found", "already exists" and a failed precondition are answers, not
failures (that is what makes every reconcile step idempotent); 400/403/422 raise `ApiRefused`; anything
transient becomes `kopf.TemporaryError`.
"""

import asyncio
import concurrent.futures
import json
from collections.abc import Mapping, Sequence
from typing import Any

import kopf
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ascend_operator.api.constants import LABEL_SERVICE
from ascend_operator.clients.caches import Caches
from ascend_operator.clients.informer import Store
from ascend_operator.clients.resources import Patch, Resource, resource_of

RETRY_DELAY = 5.0
#: (connect, read) seconds for every call: a stuck connection must not freeze a reconcile loop.
REQUEST_TIMEOUT = (5.0, 30.0)
#: Worker threads (and kept connections) for API calls: the default executor has min(32, CPUs + 4), six on
#: two cores, which a fleet's creates would queue behind; its own pool also keeps API calls from waiting
#: behind anything else that runs in threads.
KUBE_THREADS = 16
PATCH_TYPES = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


class ApiRefused(kopf.PermanentError):
    """The API server refused a request for good (400, 403, 422): retrying the same call cannot help."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(f"{status} {reason}: {body}")
        self.status = status
        self.body = body

    @property
    def message(self) -> str:
        """The API server's own message (its Status object's `message`), else the raw body."""
        try:
            parsed = json.loads(self.body)
        except ValueError:
            return self.body
        return str(parsed.get("message", self.body)) if isinstance(parsed, dict) else self.body


class NotServed(kopf.TemporaryError):
    """A create answered 404: the API server does not serve the kind (its CRD is not installed)."""

    def __init__(self, res: Resource) -> None:
        super().__init__(f"the API server does not serve {res.plural}.{res.group or 'core'}", delay=RETRY_DELAY)
        self.resource = res


def load_config(kubeconfig: str | None = None) -> None:
    """In-cluster config when running in a pod, else the kubeconfig (the given file, else KUBECONFIG or
    ~/.kube/config). A given file is read as is: the client resolves KUBECONFIG once, when imported."""
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig)
        return
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


class KubeApi:
    """`clients.resources.Kube` against an API server. With `caches` (clients/caches.py), the cached kinds
    are read from watch caches once those have listed, and what a write returns goes into them at once
    (write-through: a pass sees its own writes before the watch delivers them)."""

    def __init__(self, api_client: client.ApiClient | None = None, *, caches: Caches | None = None) -> None:
        if api_client is None:
            configuration = client.Configuration.get_default_copy()
            configuration.connection_pool_maxsize = KUBE_THREADS  # one kept connection per worker thread
            api_client = client.ApiClient(configuration)
        self._api = api_client
        self._pool = concurrent.futures.ThreadPoolExecutor(KUBE_THREADS, thread_name_prefix="kube")
        self._caches = caches

    # -- the five verbs --------------------------------------------------------------------------------
    async def get(self, res: Resource, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        if not fresh and (store := self._synced(res)) is not None:
            found = store.get(namespace, name)
            return None if found is None else dict(found)
        return await self._send(res, "get", "GET", res.path(namespace, name), tolerate={404})

    async def list(
        self, res: Resource, namespace: str, *, labels: Mapping[str, str] | None = None, fields: str = ""
    ) -> list[dict[str, Any]]:
        labels = dict(labels or {})
        store = self._synced(res)
        if store is not None and not fields and list(labels) == [LABEL_SERVICE]:
            return [dict(obj) for obj in store.select(namespace, labels[LABEL_SERVICE])]
        query = [("labelSelector", ",".join(f"{k}={v}" for k, v in labels.items()))] if labels else []
        query += [("fieldSelector", fields)] if fields else []
        found = await self._send(res, "list", "GET", res.path(namespace), query=query)
        return list((found or {}).get("items") or [])

    async def create(self, body: Mapping[str, Any]) -> bool:
        res = resource_of(body)
        path = res.path(body["metadata"]["namespace"])
        made, status = await self._outcome(res, "create", "POST", path, body=dict(body), tolerate={404, 409})
        if status == 404:
            raise NotServed(res)
        self._remember(res, made)
        return made is not None

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
        if isinstance(patch, Mapping):
            kind = "strategic" if res.builtin else "merge"
            body: Any = dict(patch)
            if resource_version is not None:
                body["metadata"] = {**(body.get("metadata") or {}), "resourceVersion": resource_version}
        else:
            kind, body = "json", [dict(op) for op in patch]
        tolerate = {404, 409} if resource_version is not None else {404}
        done = await self._send(
            res, "status" if status else "patch", "PATCH", res.path(namespace, name, status=status),
            body=body, content_type=PATCH_TYPES[kind], tolerate=tolerate,
        )  # fmt: skip
        self._remember(res, done)
        return done

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
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        if foreground:
            options["propagationPolicy"] = "Foreground"
        path = res.path(namespace, name)
        deleted = await self._send(res, "delete", "DELETE", path, body=options, tolerate={404, 409})
        if deleted is not None:
            # a pod deleted with a grace period is still there, terminating; anything else is gone (or a
            # Status object came back instead of it)
            # (grace 0 removes a pod at once, though the answer carries the deletionTimestamp it was given)
            terminating = (deleted.get("metadata") or {}).get("deletionTimestamp") is not None and grace_seconds != 0
            self._remember(res, deleted if terminating else {"metadata": {"namespace": namespace, "name": name}},
                           gone=not terminating)  # fmt: skip
        return deleted is not None

    # -- the plumbing ----------------------------------------------------------------------------------
    async def _send(self, res: Resource, verb: str, method: str, path: str, **kwargs: Any) -> dict[str, Any] | None:
        """`_outcome`'s answer alone."""
        answer, _ = await self._outcome(res, verb, method, path, **kwargs)
        return answer

    async def _outcome(
        self,
        res: Resource,
        verb: str,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        tolerate: set[int] | frozenset[int] = frozenset(),
    ) -> tuple[dict[str, Any] | None, int | None]:
        """One request in a worker thread with bounded connect and read times: the answer's JSON and None,
        or None and the tolerated status it failed with."""
        if verb not in res.verbs:
            raise ValueError(f"{verb} on {res.plural} is not in its row of clients/resources.py (nor in RBAC)")
        headers = {"Accept": "application/json", "Content-Type": content_type}
        request = self._api.param_serialize(
            method=method, resource_path=path, query_params=list(query) or None, header_params=headers, body=body,
            auth_settings=["BearerToken"],
        )  # fmt: skip
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._exchange, request), None
        except ApiException as exc:
            if exc.status in tolerate:
                return None, int(exc.status)
            if exc.status in (400, 403, 422):
                raise ApiRefused(exc.status, str(exc.reason), str(exc.body)) from exc
            raise kopf.TemporaryError(f"{exc.status} {exc.reason}", delay=RETRY_DELAY) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # timeouts, refused connections
            raise kopf.TemporaryError(f"no answer from the API server: {exc}", delay=RETRY_DELAY) from exc

    def _exchange(self, request: tuple[Any, ...]) -> dict[str, Any]:
        """Send and read (in a worker thread): json.loads of the body is ~0.1 ms where building a model
        object from it took ~5 ms of Python, CPU a busy fleet's passes need (issue 14)."""
        method, url, headers, body, post = request
        response = self._api.call_api(method, url, headers, body, post, _request_timeout=REQUEST_TIMEOUT)
        response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        loaded: Any = json.loads(response.data) if response.data else {}
        return loaded if isinstance(loaded, dict) else {}

    def _synced(self, res: Resource) -> Store | None:
        """The synced watch cache of `res`, else None."""
        if self._caches is None or not self._caches.synced(res.kind):
            return None
        return self._caches.store(res.kind)

    def _remember(self, res: Resource, obj: dict[str, Any] | None, *, gone: bool = False) -> None:
        """Put what a write returned into the cache of its kind (or, `gone`, take it out)."""
        store = self._caches.store(res.kind) if self._caches is not None else None
        if store is not None and obj is not None and isinstance(obj.get("metadata"), dict):
            (store.remove if gone else store.put)(obj)
