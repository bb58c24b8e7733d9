"""`aisctl operator`: run the kopf operator with the project's settings."""

import argparse
import asyncio
import logging

import kopf


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
    op.add_argument("--resync-seconds", type=float, default=None, help="seconds between passes without events")
    op.set_defaults(func=run_operator)


def run_operator(args: argparse.Namespace) -> int:
    """Run until interrupted."""
    from ascend_operator.controller import handlers  # registers the handlers with kopf

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    memo = kopf.Memo()
    memo.resync_seconds = args.resync_seconds or handlers.DEFAULT_RESYNC_SECONDS
    asyncio.run(
        kopf.operator(
            clusterwide=not args.namespace,
            namespaces=args.namespace,
            liveness_endpoint=args.liveness,
            standalone=args.peering is None,
            peering_name=args.peering,
            memo=memo,
        )
    )
    return 0
