"""`aisctl operator`: run the kopf operator with the project's settings."""

import argparse
import asyncio
import logging
import os
import random

import kopf

from ascend_operator.api.constants import NPU_RESOURCE
from ascend_operator.render.netpol import DEFAULT_OPERATOR_LABELS, DEFAULT_OPERATOR_NAMESPACE, OperatorPeer

#: Upper bound of a random peering priority (kopf compares plain ints; a tie pauses every tied operator).
MAX_RANDOM_PRIORITY = 2**31 - 1


def peering_priority(value: str) -> int:
    """An int, or `random`: replicas of one Deployment share their args, and equal priorities freeze them all."""
    if value == "random":
        return random.randint(1, MAX_RANDOM_PRIORITY)
    return int(value)


def label(value: str) -> tuple[str, str]:
    """`key=value`."""
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{value!r}: expected key=value")
    return key, val


def add_operator_identity(parser: argparse.ArgumentParser) -> None:
    """Where the operator's pods are, for the NetworkPolicies that admit them (operator and render)."""
    parser.add_argument(
        "--operator-namespace", default=os.environ.get("AIS_OPERATOR_NAMESPACE") or DEFAULT_OPERATOR_NAMESPACE,
        help="namespace of the operator's pods, admitted by each service's NetworkPolicy "
        f"(default: $AIS_OPERATOR_NAMESPACE or {DEFAULT_OPERATOR_NAMESPACE})",
    )  # fmt: skip
    parser.add_argument(
        "--operator-pod-label", type=label, action="append", default=None, metavar="KEY=VALUE",
        help="a label of the operator's pods (repeatable; default: "
        + ",".join(f"{k}={v}" for k, v in DEFAULT_OPERATOR_LABELS.items()) + ")",
    )  # fmt: skip


def operator_peer(args: argparse.Namespace) -> OperatorPeer:
    """The identity the flags give."""
    labels = dict(args.operator_pod_label) if args.operator_pod_label else dict(DEFAULT_OPERATOR_LABELS)
    return OperatorPeer(namespace=args.operator_namespace, pod_labels=labels)


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register `aisctl operator`."""
    op = sub.add_parser("operator", help="run the operator (reconciles AscendInferenceServices)")
    op.add_argument(
        "-n", "--namespace", action="append", default=[],
        help="watch only this namespace (repeatable); default: all namespaces",
    )  # fmt: skip
    op.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="kopf liveness endpoint URL")
    op.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    op.add_argument("--peering", default=None, help="kopf peering name (several operator replicas, one active)")
    op.add_argument(
        "--peering-priority", type=peering_priority, default=0,
        help="kopf peering priority: the highest live one works, the others wait; `random` for replicas",
    )  # fmt: skip
    op.add_argument("--resync-seconds", type=float, default=None, help="seconds between passes without events")
    op.add_argument(
        "--status-interval-seconds", type=float, default=None,
        help="seconds between status writes that only refresh the engine figures (status.metrics); "
        "conditions and replica counts are written as soon as they change (default 30)",
    )  # fmt: skip
    op.add_argument(
        "--metrics-port", type=int, default=None,
        help="serve the operator's Prometheus metrics (e.g. ascend_operator_rolls_total) on this port",
    )  # fmt: skip
    op.add_argument(
        "--npu-resource", default=NPU_RESOURCE,
        help="the Ascend device plugin's NPU resource name: huawei.com/Ascend910 (MindCluster, the default) or "
        "huawei.com/ascend-1980 (Huawei Cloud CCE)",
    )  # fmt: skip
    op.add_argument(
        "--npu-faults", action="store_true",
        help="read the Ascend device plugin's and NodeD's per-node ConfigMaps (kube-system, mindx-dl) and roll a "
        "pod whose chip or node they report faulty (NPUFault, NodeUnhealthy; NPUPreSeparate drains first); needs "
        "list/watch of ConfigMaps there (the chart's npuFaults.enabled)",
    )  # fmt: skip
    op.add_argument(
        "--node-loss", action="store_true",
        help="watch the nodes and their Leases (kube-node-lease) and force-delete a pod whose node stopped "
        "reporting for spec.health.nodeLostSeconds while its engine does not answer (NodeLost), keeping its "
        "successor off the node; needs list/watch of nodes and of leases there (the chart's nodeLoss.enabled)",
    )  # fmt: skip
    add_operator_identity(op)
    op.set_defaults(func=run_operator)


def run_operator(args: argparse.Namespace) -> int:
    """Run until interrupted."""
    from ascend_operator.controller import handlers  # registers the handlers with kopf
    from ascend_operator.controller.status import DEFAULT_LIVE_INTERVAL

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    memo = kopf.Memo()
    memo.resync_seconds = args.resync_seconds or handlers.DEFAULT_RESYNC_SECONDS
    memo.live_interval = args.status_interval_seconds or DEFAULT_LIVE_INTERVAL
    memo.npu_resource = args.npu_resource
    memo.operator_peer = operator_peer(args)
    memo.namespaces = list(args.namespace)  # the watch caches watch what kopf watches
    memo.npu_faults = args.npu_faults
    memo.node_loss = args.node_loss
    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)  # the default registry, where the roll counters live
    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            liveness_endpoint=args.liveness,
            standalone=args.peering is None,
            peering_name=args.peering,
            priority=args.peering_priority,
            memo=memo,
        )
    )
    return 0
