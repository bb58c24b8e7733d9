"""Watch caches (informers) of the objects the operator owns: one LIST, then a WATCH, per kind.

Why: a pass that LISTs its service's pods and GETs its Service, PodDisruptionBudget and NetworkPolicy
costs four API requests per service per pass, which at 200 services is hundreds of requests per second
for nothing (issue 14: 1.5 requests/s per idle service before). An informer lists once and then watches
with a server-side label selector (`inference.ascend.dev/service`, on everything the operator renders), so
the steady state is one long-lived watch per kind, and a pass reads memory.

Consistency, the two rules that keep decisions made from the cache safe (client-go's informers and
controller-runtime's cache have the same lag; ReplicaSet "expectations" solve it there):

- write-through: what the operator's own create, patch and delete calls return goes into the store at
  once (`Store.put`), so the next pass sees its own writes even before the watch delivers them, and a
  disruption decision never counts a pod it just deleted as serving;
- ordering: an object is replaced only by a newer resourceVersion. The API calls resourceVersions opaque,
  but every API server backed by etcd3 issues etcd revisions (integers that only grow); one that is not an
  integer is taken as newer. A deletion leaves a tombstone, so a late MODIFIED event cannot resurrect it.

The watch runs in a thread of its own (the Kubernetes client is synchronous; a watch would hold a worker
of the default executor for minutes), with raw JSON (no model round trip), and hands every event to the
event loop, which alone touches the store. A change wakes the owning service's loop after the store holds
it. An expired watch (410 Gone) relists; an unreachable API server is retried with a back-off while the
store keeps its last state.
"""

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(namespace, name)."""
Obj = Mapping[str, Any]

#: Seconds a watch request lasts before the API server ends it (then it resumes from the last version):
#: short, so a connection that died without a word (no FIN through a NAT or a dead apiserver) costs at
#: most this plus READ_SLACK_SECONDS of staleness, for one request per kind per minute.
WATCH_SECONDS = 60
#: The client gives up reading a watch this long after the server should have ended it.
READ_SLACK_SECONDS = 15
#: Seconds between retries while the API server does not answer; a refusal (403: RBAC) doubles its delay
#: per failure up to MAX_RETRY_SECONDS, so it is retried, and logged, once a minute, not every 2 s.
RETRY_SECONDS = 2.0
MAX_RETRY_SECONDS = 60.0
#: Tombstones kept (oldest dropped first): enough for every deletion between two watch events.
MAX_TOMBSTONES = 4096


def _version(obj: Obj) -> int | None:
    raw = (obj.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        return None


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _older(new: int | None, old: int | None) -> bool:
    """Whether `new` is known to be older than or as old as `old` (unknown versions are taken as newer)."""
    return new is not None and old is not None and new <= old


class Store:
    """Objects of one kind by (namespace, name), indexed by the value of one label. Not thread-safe: only
    the event loop touches it. Returned objects are shared: read them, never change them."""

    def __init__(self, *, index_label: str) -> None:
        self._label = index_label
        self._objects: dict[Key, Obj] = {}
        self._index: dict[tuple[str, str], set[str]] = {}
        self._tombstones: OrderedDict[Key, int | None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, namespace: str, name: str) -> Obj | None:
        """The object, or None."""
        return self._objects.get((namespace, name))

    def values(self) -> list[Obj]:
        """Every object, by (namespace, name)."""
        return [self._objects[key] for key in sorted(self._objects)]

    def select(self, namespace: str, value: str) -> list[Obj]:
        """The objects in `namespace` whose index label has `value`, by name."""
        names = sorted(self._index.get((namespace, value), ()))
        return [self._objects[(namespace, n)] for n in names]

    def _owner(self, obj: Obj) -> str | None:
        value = ((obj.get("metadata") or {}).get("labels") or {}).get(self._label)
        return None if value is None else str(value)

    def _unlink(self, key: Key) -> None:
        old = self._objects.pop(key, None)
        owner = None if old is None else self._owner(old)
        if owner is not None:
            names = self._index.get((key[0], owner), set())
            names.discard(key[1])
            if not names:
                self._index.pop((key[0], owner), None)

    def put(self, obj: Obj) -> bool:
        """Store `obj` unless what is stored (or its tombstone) is as new; True when it was stored."""
        key = _key(obj)
        version = _version(obj)
        current = self._objects.get(key)
        if current is not None and _older(version, _version(current)):
            return False
        if current is None and key in self._tombstones and _older(version, self._tombstones[key]):
            return False
        self._tombstones.pop(key, None)
        self._unlink(key)
        self._objects[key] = obj
        owner = self._owner(obj)
        if owner is not None:
            self._index.setdefault((key[0], owner), set()).add(key[1])
        return True

    def remove(self, obj: Obj) -> bool:
        """Forget `obj` (a DELETED event, or a delete that took effect at once); True when it was stored."""
        key = _key(obj)
        current = self._objects.get(key)
        version, stored = _version(obj), None if current is None else _version(current)
        if version is not None and stored is not None and version < stored:
            return False  # the deletion of an older incarnation: the stored object is newer
        self._tombstones[key] = version
        self._tombstones.move_to_end(key)
        while len(self._tombstones) > MAX_TOMBSTONES:
            self._tombstones.popitem(last=False)
        if current is None:
            return False
        self._unlink(key)
        return True

    def replace(self, objects: list[Obj], *, namespace: str | None = None) -> list[Obj]:
        """Take a fresh LIST as the whole truth of `namespace` (None: of every namespace); the objects that
        changed or went, for waking their owners."""
        fresh = {_key(o): o for o in objects}
        mine = [k for k in self._objects if namespace is None or k[0] == namespace]
        changed = [self._objects[k] for k in mine if k not in fresh]
        changed += [o for k, o in fresh.items() if self._objects.get(k) != o]
        for key in mine:
            self._unlink(key)
        for key in [k for k in self._tombstones if namespace is None or k[0] == namespace]:
            del self._tombstones[key]
        for obj in objects:
            self.put(obj)
        return changed


Lister = Callable[..., Any]
"""A list call of one kind in one namespace or all (clients/caches.py `lister`, shaped like the Kubernetes
client's typed list calls); called with label_selector and the watch arguments, it answers the raw response."""


@dataclass(frozen=True)
class WatchEvent:
    """A watch event as the store takes it."""

    type: str
    obj: Obj


class Informer:
    """LIST + WATCH of one kind in one namespace (None: every namespace) into a `Store` (several informers
    may share one); `on_change(obj)` after the store took a change."""

    def __init__(
        self,
        *,
        kind: str,
        lister: Lister,
        namespace: str | None,
        selector: str,
        store: Store,
        on_change: Callable[[Obj], None] = lambda _: None,
    ) -> None:
        self.kind = kind
        self.store = store
        self._lister = lister
        self._namespace = namespace
        self._selector = selector
        self._on_change = on_change
        self.synced = False
        """Whether the first LIST has reached the store (before that, readers ask the API server)."""
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start the watch thread; call from the event loop."""
        self._loop = asyncio.get_running_loop()
        where = self._namespace or "all namespaces"
        threading.Thread(target=self._run, name=f"informer {self.kind} {where}", daemon=True).start()

    def stop(self) -> None:
        """Ask the thread to end (it notices at its next event or watch timeout; it is a daemon)."""
        self._stop.set()

    # -- the event loop side --------------------------------------------------------------------------

    def _listed(self, objects: list[Obj]) -> None:
        for obj in self.store.replace(objects, namespace=self._namespace):
            self._on_change(obj)
        if not self.synced:
            log.info("watch cache of %s in %s: %d listed", self.kind, self._namespace or "all namespaces", len(objects))
        self.synced = True

    def _event(self, event: WatchEvent) -> None:
        changed = self.store.remove(event.obj) if event.type == "DELETED" else self.store.put(event.obj)
        if log.isEnabledFor(logging.DEBUG):
            meta = event.obj.get("metadata") or {}
            log.debug(
                "%s %s %s/%s rv=%s taken=%s",
                self.kind, event.type, meta.get("namespace"), meta.get("name"), meta.get("resourceVersion"), changed,
            )  # fmt: skip
        if changed:
            self._on_change(event.obj)

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn, *args)

    # -- the watch thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        version: str | None = None
        delay = RETRY_SECONDS
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
                delay = RETRY_SECONDS
                continue
            except ApiException as exc:
                if exc.status == 410:  # expired: relist
                    version = None
                    continue
                log.warning("watch of %s failed (%s %s); retrying in %.0fs", self.kind, exc.status, exc.reason, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            except Exception as exc:  # the API server is down or the connection broke: keep the store, retry
                log.info("watch of %s interrupted (%s); retrying", self.kind, type(exc).__name__)
                self._stop.wait(RETRY_SECONDS)  # soon: a restarted API server is read again within seconds

    def _list(self) -> str:
        resp = self._lister(label_selector=self._selector, _preload_content=False, _request_timeout=(5.0, 60.0))
        body = json.loads(resp.data)
        kind = str(body.get("kind") or "").removesuffix("List")
        items = [{"apiVersion": body.get("apiVersion"), "kind": kind, **item} for item in body.get("items") or []]
        self._post(self._listed, items)
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        resp = self._lister(
            label_selector=self._selector,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(5.0, WATCH_SECONDS + READ_SLACK_SECONDS),
        )
        try:
            for event in _events(iter_resp_lines(resp)):  # type: ignore[no-untyped-call]
                if self._stop.is_set():
                    break
                version = str((event.obj.get("metadata") or {}).get("resourceVersion") or version)
                if event.type != "BOOKMARK":
                    self._post(self._event, event)
        finally:
            resp.close()
            resp.release_conn()
        return version


def _events(lines: Iterator[str]) -> Iterator[WatchEvent]:
    """Watch events from the stream's JSON lines; an ERROR event (410 Gone: the version expired) raises."""
    for line in lines:
        if not line.strip():
            continue
        raw = json.loads(line)
        obj = raw.get("object") if isinstance(raw, Mapping) else None
        if not isinstance(obj, Mapping):
            continue
        if raw.get("type") == "ERROR":
            raise ApiException(status=int(obj.get("code") or 500), reason=str(obj.get("reason") or "watch error"))
        yield WatchEvent(type=str(raw.get("type")), obj=obj)
