"""Watch caches of the Ascend device plugin's and NodeD's per-node ConfigMaps (health/chips.py reads them).

Why watches: the health loop asks for every serving pod's node every scrape interval; a GET per node and
pass would cost a fleet of 200 services more API requests than everything else it does. The plugin labels
its ConfigMaps `mx-consumer-cim=true` (ascend-common/api/consts.go:109; NodeD's too, configmap_reporter.go
109), so the watch lists only those, in the two namespaces they live in, and the chart grants list/watch
of ConfigMaps there and nowhere else (templates/rbac-npu.yaml).
"""

import functools
from collections.abc import Callable

from kubernetes import client

from ascend_operator.api.constants import CHIP_NAME_LABEL, DRIVER_VERSION_LABEL
from ascend_operator.clients.informer import Informer, Obj, Store
from ascend_operator.health.chips import (
    CONSUMER_LABEL,
    DEVICE_INFO_NAMESPACE,
    DEVICE_INFO_PREFIX,
    NODE_INFO_NAMESPACE,
    NODE_INFO_PREFIX,
    NodeReport,
    node_report,
)

SELECTOR = f"{CONSUMER_LABEL}=true"
NAMESPACES = (DEVICE_INFO_NAMESPACE, NODE_INFO_NAMESPACE)


class ChipReports:
    """The two namespaces' labelled ConfigMaps, and each node's report read from them."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self.store = Store(index_label=CONSUMER_LABEL)
        self._informers: list[Informer] = []
        #: node -> (the two ConfigMaps' resourceVersions, the report read from them)
        self._parsed: dict[str, tuple[tuple[str | None, str | None], NodeReport]] = {}

    def start(self, on_change: Callable[[Obj], None] = lambda _: None) -> None:
        """Start both watches (from the event loop); `on_change(obj)` after the store took a change."""
        for ns in NAMESPACES:
            informer = Informer(
                kind="configmaps",
                lister=functools.partial(self._core.list_namespaced_config_map, ns),
                namespace=ns,
                selector=SELECTOR,
                store=self.store,
                on_change=on_change,
            )
            informer.start()
            self._informers.append(informer)

    def stop(self) -> None:
        """Ask both watches to end."""
        for informer in self._informers:
            informer.stop()

    @property
    def synced(self) -> bool:
        """Both namespaces listed once: until then no node is judged (an absent NodeD ConfigMap means healthy
        only once the list has shown it absent)."""
        return bool(self._informers) and all(i.synced for i in self._informers)

    def reports(self) -> list[NodeReport]:
        """Every node either report names, read (empty before the caches listed)."""
        return [r for node in sorted(_nodes(self.store)) if (r := self.report(node)) is not None]

    def report(self, node: str) -> NodeReport | None:
        """What the plugin and NodeD say of `node`; None before the caches listed."""
        if not self.synced:
            return None
        device = self.store.get(DEVICE_INFO_NAMESPACE, f"{DEVICE_INFO_PREFIX}{node}")
        noded = self.store.get(NODE_INFO_NAMESPACE, f"{NODE_INFO_PREFIX}{node}")
        versions = (_version(device), _version(noded))
        cached = self._parsed.get(node)
        if cached is not None and cached[0] == versions:
            return cached[1]  # the plugin rewrites a ConfigMap on change or every 5 min: parse it once per write
        report = node_report(node, _data(device), _data(noded))
        self._parsed[node] = (versions, report)
        return report


class NodeLabels:
    """The NPU nodes' device-plugin labels (driver version, chip), for spec.runtime's placement requirements
    (render/fitness.py): a watch of the nodes the plugin labelled, read-only, cluster-wide."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self.store = Store(index_label=CHIP_NAME_LABEL)
        self._informer: Informer | None = None

    def start(self) -> None:
        """Start the watch (from the event loop)."""
        self._informer = Informer(
            kind="nodes", lister=self._core.list_node, namespace=None, selector=DRIVER_VERSION_LABEL, store=self.store
        )
        self._informer.start()

    def stop(self) -> None:
        if self._informer is not None:
            self._informer.stop()

    def labels(self) -> list[tuple[str, dict[str, str]]]:
        """Each labelled node's name and labels (empty before the watch listed)."""
        return [
            (str((n.get("metadata") or {}).get("name")), dict((n.get("metadata") or {}).get("labels") or {}))
            for n in self.store.values()
        ]


def _nodes(store: Store) -> set[str]:
    return {
        str((obj.get("metadata") or {}).get("name") or "").removeprefix(prefix)
        for ns, prefix in ((DEVICE_INFO_NAMESPACE, DEVICE_INFO_PREFIX), (NODE_INFO_NAMESPACE, NODE_INFO_PREFIX))
        for obj in store.select(ns, "true")
        if str((obj.get("metadata") or {}).get("name") or "").startswith(prefix)
    }


def _data(obj: Obj | None) -> dict[str, str] | None:
    data = (obj or {}).get("data")
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None


def _version(obj: Obj | None) -> str | None:
    """The object's resourceVersion (None when absent): a new one on every write of it."""
    return None if obj is None else str((obj.get("metadata") or {}).get("resourceVersion") or "") or None
