"""Watch caches of the Ascend device plugin's and NodeD's per-node ConfigMaps (health/chips.py reads them).

Why watches: the health loop asks for every serving pod's node every scrape interval; a GET per node and
pass would cost a fleet of 200 services more API requests than everything else it does. The plugin labels
its ConfigMaps `mx-consumer-cim=true` (ascend-common/api/consts.go:109; NodeD's too, configmap_reporter.go
109), so the watch lists only those, in the two namespaces they live in, and the chart grants list/watch
of ConfigMaps there and nowhere else (templates/rbac-npu.yaml). ClusterD's processed view lives in one of
them (mindx-dl) under its own label (`mx-consumer-volcano=true`, contract/clusterd.py): a third watch.

Staleness is judged by this operator's clock (health/chips.py STALE_SECONDS): each node's report carries
when this process saw it change (`seen`), never the node's UpdateTime compared with this clock, since a
node whose clock is off by 15 minutes would otherwise have every report ignored (or a dead plugin's
believed). A report already there when the watch first lists it counts as seen then.
"""

import functools
import time
from collections.abc import Callable
from dataclasses import replace

from kubernetes import client

from ascend_operator.api.constants import CHIP_NAME_LABEL, DRIVER_VERSION_LABEL
from ascend_operator.clients.informer import Informer, Obj, Store
from ascend_operator.contract.clusterd import (
    CLUSTER_LABEL,
    CLUSTER_NAMESPACE,
    ClusterView,
    preferred,
    read_cluster_view,
)
from ascend_operator.contract.mindcluster import (
    CHIP_RESOURCE,
    CONSUMER_LABEL,
    DEVICE_INFO_NAMESPACE,
    DEVICE_INFO_PREFIX,
    NODE_INFO_NAMESPACE,
    NODE_INFO_PREFIX,
    NPU_RESOURCE_PREFIX,
    NodeReport,
    node_report,
)

SELECTOR = f"{CONSUMER_LABEL}=true"
NAMESPACES = (DEVICE_INFO_NAMESPACE, NODE_INFO_NAMESPACE)


class ChipReports:
    """The two namespaces' labelled ConfigMaps and ClusterD's, and each node's report read from them.
    `capacity(node)`: the node's NPUs (NodeLabels.capacity); `clock`: when a change is seen."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        capacity: Callable[[str], int | None] = lambda _: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._core = client.CoreV1Api(api)
        self.store = Store(index_label=CONSUMER_LABEL)
        self.cluster = Store(index_label=CLUSTER_LABEL)
        self._informers: list[Informer] = []
        self._capacity, self._clock = capacity, clock
        #: node -> (the two ConfigMaps' resourceVersions, the report read from them)
        self._parsed: dict[str, tuple[tuple[str | None, str | None], NodeReport]] = {}
        self._view: tuple[tuple[tuple[str, str | None], ...], ClusterView] = ((), ClusterView())
        #: node -> (what its chips' report said, when this operator saw it say so first)
        self._seen: dict[str, tuple[object, float]] = {}

    def start(self, on_change: Callable[[Obj], None] = lambda _: None) -> None:
        """Start the watches (from the event loop); `on_change(obj)` after a store took a change."""
        watches = [(ns, SELECTOR, self.store) for ns in NAMESPACES]
        for ns, selector, store in [*watches, (CLUSTER_NAMESPACE, f"{CLUSTER_LABEL}=true", self.cluster)]:
            informer = Informer(
                kind="configmaps",
                lister=functools.partial(self._core.list_namespaced_config_map, ns),
                namespace=ns,
                selector=selector,
                store=store,
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
        """Every node any report names, read (empty before the caches listed)."""
        view = self.view()
        named = _nodes(self.store) | set(view.devices) | set(view.node_status) | set(view.switch_status)
        return [r for node in sorted(named) if (r := self.report(node)) is not None]

    def view(self) -> ClusterView:
        """ClusterD's ConfigMaps read, once per write of any of them."""
        cms = self.cluster.select(CLUSTER_NAMESPACE, "true")
        versions = tuple((str((o.get("metadata") or {}).get("name") or ""), _version(o)) for o in cms)
        if versions != self._view[0]:
            names = [name for name, _ in versions]
            self._view = (versions, read_cluster_view(zip(names, (_data(o) for o in cms), strict=True)))
        return self._view[1]

    def report(self, node: str) -> NodeReport | None:
        """What the plugin and NodeD (or ClusterD, where it runs) say of `node`; None before the caches listed."""
        if not self.synced:
            return None
        device = self.store.get(DEVICE_INFO_NAMESPACE, f"{DEVICE_INFO_PREFIX}{node}")
        noded = self.store.get(NODE_INFO_NAMESPACE, f"{NODE_INFO_PREFIX}{node}")
        versions = (_version(device), _version(noded))
        cached = self._parsed.get(node)
        if cached is None or cached[0] != versions:
            # the plugin rewrites a ConfigMap on change or every 5 min: parse it once per write
            self._parsed[node] = cached = (versions, node_report(node, _data(device), _data(noded)))
        view = self.view()
        report = preferred(cached[1], view)
        report = replace(report, problems=report.problems + view.problems, chips_per_node=self._capacity(node))
        if device is None and node not in view.devices:
            self._seen.pop(node, None)
            return report  # no chip report: nothing to go stale
        said = (report.source, report.updated, report.faults, report.unhealthy)  # the chips' report, not NodeD's
        if (seen := self._seen.get(node)) is None or seen[0] != said:
            self._seen[node] = seen = (said, self._clock())
        return replace(report, seen=seen[1])


class NodeLabels:
    """The NPU nodes' device-plugin labels (driver version, chip), for spec.runtime's placement requirements
    (render/fitness.py), and their NPU capacity, for the "more than half faulty" rule (health/chips.py): a
    watch of the nodes, read-only, cluster-wide."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self.store = Store(index_label=CHIP_NAME_LABEL)
        self._informer: Informer | None = None

    def start(self) -> None:
        """Start the watch (from the event loop)."""
        # every node, not only those the plugin labelled with a driver version: a node's capacity counts
        # for the fault rules whatever its labels
        self._informer = Informer(
            kind="nodes", lister=self._core.list_node, namespace=None, selector="", store=self.store
        )
        self._informer.start()

    def stop(self) -> None:
        if self._informer is not None:
            self._informer.stop()

    def labels(self) -> list[tuple[str, dict[str, str]]]:
        """Each node the plugin labelled: its name and labels (empty before the watch listed)."""
        return [
            (str((n.get("metadata") or {}).get("name")), labels)
            for n in self.store.values()
            if DRIVER_VERSION_LABEL in (labels := dict((n.get("metadata") or {}).get("labels") or {}))
        ]

    def capacity(self, node: str) -> int | None:
        """The node's NPUs: its capacity (the plugin registers every chip, healthy or not; an Atlas 800 A2
        lists 8, an A3 node 16) of `huawei.com/Ascend910` or `huawei.com/npu`, else its allocatable; None
        when the node or the resource is not known."""
        status = (self.store.get("", node) or {}).get("status") or {}
        for part in ("capacity", "allocatable"):
            listed = status.get(part) or {}
            for resource in (CHIP_RESOURCE, NPU_RESOURCE_PREFIX):
                if str(listed.get(resource) or "").isdigit():
                    return int(listed[resource])
        return None


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
