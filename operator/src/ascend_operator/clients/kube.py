"""A small async facade over the official Kubernetes client for exactly what the operator does.

The official client is synchronous; each call runs in a worker thread of its own pool so the kopf event
loop never blocks.
Errors are translated once: "already exists" and "not found" are outcomes, not failures (that is what
makes every reconcile step idempotent), and anything transient becomes `kopf.TemporaryError`.
"""

import asyncio
import base64
import binascii
import concurrent.futures
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import kopf
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from ascend_operator.api.constants import (
    GROUP,
    LABEL_SERVICE,
    LWS_GROUP,
    LWS_PLURAL,
    LWS_VERSION,
    PLURAL,
    POOL_GROUP,
    POOL_PLURAL,
    POOL_VERSION,
    VERSION,
)
from ascend_operator.clients.caches import Caches
from ascend_operator.clients.informer import Store

T = TypeVar("T")
RETRY_DELAY = 5.0
#: (connect, read) seconds for every call: a stuck connection must not freeze a reconcile loop.
REQUEST_TIMEOUT = (5.0, 30.0)
#: Worker threads (and kept connections) for API calls: the default executor has min(32, CPUs + 4), six on
#: two cores, which a fleet's creates would queue behind; its own pool also keeps API calls from waiting
#: behind anything else that runs in threads.
KUBE_THREADS = 16


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
    """The operator's Kubernetes calls. With `caches` (clients/caches.py), pods, Services, PDBs and
    NetworkPolicies are read from watch caches once those have listed, and what a write returns goes
    into them at once (write-through: a pass sees its own writes before the watch delivers them);
    `fresh=True` asks the API server anyway."""

    def __init__(self, api_client: client.ApiClient | None = None, *, caches: Caches | None = None) -> None:
        if api_client is None:
            config = client.Configuration.get_default_copy()
            config.connection_pool_maxsize = KUBE_THREADS  # one kept connection per worker thread
            api_client = client.ApiClient(config)
        self._api = api_client
        self._pool = concurrent.futures.ThreadPoolExecutor(KUBE_THREADS, thread_name_prefix="kube")
        self._core = client.CoreV1Api(self._api)
        self._custom = client.CustomObjectsApi(self._api)
        self._net = client.NetworkingV1Api(self._api)
        self._policy = client.PolicyV1Api(self._api)
        self._caches = caches

    def _cache(self, kind: str) -> Store | None:
        """The synced store of `kind` (Pod, Service, PodDisruptionBudget, NetworkPolicy), else None."""
        if self._caches is None or not self._caches.synced(kind):
            return None
        return self._caches.store(kind)

    def _remember(self, kind: str, obj: dict[str, Any] | None, *, gone: bool = False) -> None:
        """Put what a write returned (the API server's JSON) into the cache of `kind`; `gone`: forget it (a
        deletion without a grace period, or a delete that returns no object)."""
        store = self._caches.store(kind) if self._caches is not None else None
        if store is not None and obj is not None and isinstance(obj.get("metadata"), dict):
            (store.remove if gone else store.put)(obj)

    def _forget(self, kind: str, namespace: str, name: str) -> None:
        self._remember(kind, {"metadata": {"namespace": namespace, "name": name}}, gone=True)

    async def _call(
        self, fn: Callable[..., T], *args: Any, tolerate: frozenset[int] = frozenset(), **kwargs: Any
    ) -> T | None:
        """Run one API call in a thread, with a bounded connect and read time; None when it failed with a
        tolerated status."""
        result, _ = await self._outcome(fn, *args, tolerate=tolerate, **kwargs)
        return result

    async def _outcome(
        self, fn: Callable[..., T], *args: Any, tolerate: frozenset[int] = frozenset(), **kwargs: Any
    ) -> tuple[T | None, int | None]:
        """`_call` that also says which tolerated status it met (None when the call succeeded)."""
        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        try:
            call = functools.partial(fn, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self._pool, call), None
        except ApiException as exc:
            if exc.status in tolerate:
                return None, int(exc.status)
            if exc.status in (400, 403, 422):
                raise ApiRefused(exc.status, str(exc.reason), str(exc.body)) from exc
            raise kopf.TemporaryError(f"{exc.status} {exc.reason}", delay=RETRY_DELAY) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # timeouts, refused connections
            raise kopf.TemporaryError(f"no answer from the API server: {exc}", delay=RETRY_DELAY) from exc

    async def list_pods(self, namespace: str, service: str) -> list[dict[str, Any]]:
        """The engine pods of one service, as plain dicts (camelCase, as the API returns them)."""
        store = self._cache("Pod")
        if store is not None:
            return [dict(pod) for pod in store.select(namespace, service)]
        selector = f"{LABEL_SERVICE}={service}"
        result = await self._call(_as_json(self._core.list_namespaced_pod), namespace, label_selector=selector)
        return list(result.get("items") or []) if result else []

    async def read_ais(self, namespace: str, name: str) -> dict[str, Any] | None:
        """An AscendInferenceService as a plain dict, or None."""
        obj = await self._call(
            self._custom.get_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, name,
            tolerate=frozenset({404}),
        )  # fmt: skip
        return None if obj is None else dict(cast(Mapping[str, Any], obj))

    async def list_mount_failures(self, namespace: str) -> list[dict[str, Any]]:
        """FailedMount events about pods in a namespace (the pod status only says ContainerCreating)."""
        selector = "involvedObject.kind=Pod,reason=FailedMount"
        result = await self._call(_as_json(self._core.list_namespaced_event), namespace, field_selector=selector)
        return list(result.get("items") or []) if result else []

    async def create(self, body: Mapping[str, Any]) -> bool:
        """Create a pod, Service, NetworkPolicy or PodDisruptionBudget; False when it already exists (a retry)."""
        creators: dict[str, Callable[..., Any]] = {
            "Pod": self._core.create_namespaced_pod,
            "Service": self._core.create_namespaced_service,
            "NetworkPolicy": self._net.create_namespaced_network_policy,
            "PodDisruptionBudget": self._policy.create_namespaced_pod_disruption_budget,
        }
        create = _as_json(creators[body["kind"]])
        made = await self._call(create, body["metadata"]["namespace"], dict(body), tolerate=frozenset({409}))
        self._remember(body["kind"], made)
        return made is not None

    async def read_network_policy(self, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        """The NetworkPolicy, or None."""
        if not fresh and (store := self._cache("NetworkPolicy")) is not None:
            return _copy(store.get(namespace, name))
        read = _as_json(self._net.read_namespaced_network_policy)
        return await self._call(read, name, namespace, tolerate=frozenset({404}))

    async def patch_network_policy(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Strategic-merge-patch a NetworkPolicy (its rule lists have no merge key: they are replaced)."""
        done = await self._call(_as_json(self._net.patch_namespaced_network_policy), name, namespace, dict(patch))
        self._remember("NetworkPolicy", done)

    async def delete_network_policy(self, namespace: str, name: str) -> None:
        """Delete a NetworkPolicy (gone already is fine)."""
        delete = self._net.delete_namespaced_network_policy
        await self._call(delete, name, namespace, tolerate=frozenset({404}))
        self._forget("NetworkPolicy", namespace, name)

    async def read_secret_key(self, namespace: str, name: str, key: str) -> tuple[str, str] | None:
        """One value of a Secret and the Secret's resourceVersion; None when the Secret or key is missing or
        not readable (403). Only `get` on one named Secret: the operator never lists Secrets. The value is
        never logged."""
        read = _as_json(self._core.read_namespaced_secret)
        secret = await self._call(read, name, namespace, tolerate=frozenset({403, 404}))
        if secret is None:
            return None
        raw = (secret.get("data") or {}).get(key)
        if raw is None:
            return None
        try:
            value = base64.b64decode(raw, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return value, str((secret.get("metadata") or {}).get("resourceVersion") or "")

    async def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        """Delete one pod if it is still the one meant (uid precondition); False when already gone.
        `grace_seconds` overrides the pod's terminationGracePeriodSeconds (a hung engine's short one)."""
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=uid), grace_period_seconds=grace_seconds
        )
        gone = frozenset({404, 409})
        delete = _as_json(self._core.delete_namespaced_pod)
        deleted = await self._call(delete, name, namespace, body=options, tolerate=gone)
        if deleted is not None:  # graceful: the pod, now terminating; without a grace period it is gone
            terminating = (deleted.get("metadata") or {}).get("deletionTimestamp") is not None
            self._remember("Pod", deleted, gone=not terminating)
        return deleted is not None

    async def read_lws(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A LeaderWorkerSet, or None (also when the LWS CRD is not installed)."""
        found = await self._call(
            self._custom.get_namespaced_custom_object,
            LWS_GROUP, LWS_VERSION, namespace, LWS_PLURAL, name,
            tolerate=frozenset({404}),
        )  # fmt: skip
        return None if found is None else dict(cast(Mapping[str, Any], found))

    async def create_lws(self, body: Mapping[str, Any]) -> bool:
        """Create a LeaderWorkerSet; False when it already exists."""
        made = await self._call(
            self._custom.create_namespaced_custom_object,
            LWS_GROUP, LWS_VERSION, body["metadata"]["namespace"], LWS_PLURAL, dict(body),
            tolerate=frozenset({409}),
        )  # fmt: skip
        return made is not None

    async def patch_lws(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch a LeaderWorkerSet (its controller rolls the groups one at a time)."""
        await self._call(
            self._custom.patch_namespaced_custom_object,
            LWS_GROUP, LWS_VERSION, namespace, LWS_PLURAL, name, dict(patch),
        )  # fmt: skip

    async def delete_lws(self, namespace: str, name: str) -> bool:
        """Delete a LeaderWorkerSet and, in the foreground, its groups; False when already gone."""
        deleted = await self._call(
            self._custom.delete_namespaced_custom_object,
            LWS_GROUP, LWS_VERSION, namespace, LWS_PLURAL, name,
            body=client.V1DeleteOptions(propagation_policy="Foreground"),
            tolerate=frozenset({404}),
        )  # fmt: skip
        return deleted is not None

    async def read_service(self, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        """The Service, or None."""
        if not fresh and (store := self._cache("Service")) is not None:
            return _copy(store.get(namespace, name))
        read = _as_json(self._core.read_namespaced_service)
        return await self._call(read, name, namespace, tolerate=frozenset({404}))

    async def patch_service(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Strategic-merge-patch a Service."""
        done = await self._call(_as_json(self._core.patch_namespaced_service), name, namespace, dict(patch))
        self._remember("Service", done)

    async def read_pdb(self, namespace: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        """The PodDisruptionBudget, or None."""
        if not fresh and (store := self._cache("PodDisruptionBudget")) is not None:
            return _copy(store.get(namespace, name))
        read = _as_json(self._policy.read_namespaced_pod_disruption_budget)
        return await self._call(read, name, namespace, tolerate=frozenset({404}))

    async def patch_pdb(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """Merge-patch a PodDisruptionBudget (its spec is mutable since policy/v1)."""
        patch_pdb = _as_json(self._policy.patch_namespaced_pod_disruption_budget)
        done = await self._call(patch_pdb, name, namespace, dict(patch))
        self._remember("PodDisruptionBudget", done)

    async def delete_pdb(self, namespace: str, name: str) -> None:
        """Delete a PodDisruptionBudget (gone already is fine)."""
        await self._call(
            self._policy.delete_namespaced_pod_disruption_budget, name, namespace, tolerate=frozenset({404})
        )
        self._forget("PodDisruptionBudget", namespace, name)

    async def patch_pod_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        """Strategic-merge-patch a pod's status (readiness-gate conditions); False when the pod is gone."""
        done = await self._call(
            _as_json(self._core.patch_namespaced_pod_status), name, namespace, dict(patch), tolerate=frozenset({404})
        )
        self._remember("Pod", done)
        return done is not None

    async def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        """Merge-patch a pod's metadata (the drain and drift-baseline annotations); False when it is gone."""
        done = await self._call(
            _as_json(self._core.patch_namespaced_pod), name, namespace, dict(patch), tolerate=frozenset({404})
        )
        self._remember("Pod", done)
        return done is not None

    async def patch_status_at(
        self, namespace: str, name: str, resource_version: str, status: Mapping[str, Any]
    ) -> bool:
        """Merge-patch the status only if the object is still at `resource_version` (the API server refuses
        a patch carrying metadata.resourceVersion with 409 Conflict when the object moved on). False on a
        conflict or when the object is gone: re-read and decide again."""
        body = {"metadata": {"resourceVersion": resource_version}, "status": dict(status)}
        done, _ = await self._outcome(
            self._custom.patch_namespaced_custom_object_status,
            GROUP, VERSION, namespace, PLURAL, name, body,
            tolerate=frozenset({404, 409}),
        )  # fmt: skip
        return done is not None

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge-patch the status subresource of an AscendInferenceService (gone objects are ignored)."""
        await self._call(
            self._custom.patch_namespaced_custom_object_status,
            GROUP, VERSION, namespace, PLURAL, name, {"status": dict(status)},
            tolerate=frozenset({404}),
        )  # fmt: skip

    async def read_inference_pool(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The InferencePool, or None when there is none (or its CRD is not installed)."""
        pool = await self._call(
            self._custom.get_namespaced_custom_object,
            POOL_GROUP, POOL_VERSION, namespace, POOL_PLURAL, name,
            tolerate=frozenset({404}),
        )  # fmt: skip
        return pool if isinstance(pool, dict) else None

    async def create_inference_pool(self, body: Mapping[str, Any]) -> bool | None:
        """Create an InferencePool: True when created, False when it already exists, None when the API
        server does not serve InferencePools (404: the GIE CRD is not installed)."""
        namespace = body["metadata"]["namespace"]
        _, status = await self._outcome(
            self._custom.create_namespaced_custom_object,
            POOL_GROUP, POOL_VERSION, namespace, POOL_PLURAL, dict(body),
            tolerate=frozenset({404, 409}),
        )  # fmt: skip
        return {None: True, 409: False}.get(status)

    async def replace_inference_pool_spec(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        """Set the pool's whole spec (a JSON patch `replace`, so no stale matchLabels key survives a merge)."""
        patch = [{"op": "replace", "path": "/spec", "value": dict(spec)}]
        await self._call(
            self._custom.patch_namespaced_custom_object,
            POOL_GROUP, POOL_VERSION, namespace, POOL_PLURAL, name, patch,
            _content_type="application/json-patch+json",
        )  # fmt: skip

    async def delete_inference_pool(self, namespace: str, name: str, uid: str) -> bool:
        """Delete the pool if it is still the one meant (uid precondition); False when already gone."""
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
        deleted = await self._call(
            self._custom.delete_namespaced_custom_object,
            POOL_GROUP, POOL_VERSION, namespace, POOL_PLURAL, name,
            body=options, tolerate=frozenset({404, 409}),
        )  # fmt: skip
        return deleted is not None


def _as_json(fn: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """`fn` answering with the API server's JSON as a dict instead of the client's model classes: building a
    V1Pod from an answer and sanitizing it back to a dict takes ~5 ms of Python, json.loads ~0.1 ms, and on
    a busy fleet that CPU was on a new service's path to its pod (issue 14). Runs in the worker thread,
    which reads the body; a refusal still raises ApiException with the server's message."""

    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        response = fn(*args, _preload_content=False, **kwargs)
        try:
            loaded = json.loads(response.data)
        finally:
            response.release_conn()
        return loaded if isinstance(loaded, dict) else {}

    return call


def _copy(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A shallow copy of a cached object (callers get a dict of their own; nested values are shared)."""
    return None if obj is None else dict(obj)
