"""`aisctl rollout status|history|undo NAME`: a service's revisions as kubectl shows a StatefulSet's.

Why: a change judged on its first replica (spec.rollout.analysis) may be rolled back by the operator while
the spec still says what was asked; `status` says so with the signal and both values, `history` lists the
revisions the operator keeps (ControllerRevisions it owns), and `undo` writes a revision's spec back into
the service (the previous one by default, `--to-revision N` another), keeping spec.replicas: after undo
the spec and the pods agree again, without a second rollout when the pods already run it.
"""

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ascend_operator.api.revision import RolloutPhase

EXIT_ROLLED_BACK = 1
EXIT_NOT_FOUND = 2


def status_lines(ais: Mapping[str, Any]) -> tuple[list[str], int]:
    """What `rollout status` prints for a service as read, and its exit code (0: complete or on its way)."""
    name = ais["metadata"]["name"]
    st = ais.get("status") or {}
    rollout = st.get("rollout") or {}
    desired = int((ais.get("spec") or {}).get("replicas", 1))
    update = st.get("updateRevision") or ""
    counts = {c.get("revision"): c for c in st.get("revisions") or []}
    on_update = counts.get(update) or {}
    phase = rollout.get("phase") if rollout.get("revision") and update.endswith(str(rollout.get("revision"))) else None
    if phase == RolloutPhase.ROLLED_BACK.value:
        lines = [
            f'service "{name}" revision {update} rolled back to {st.get("currentRevision")}: {rollout.get("message")}',
            f"  signal {rollout.get('signal')}: new revision {rollout.get('canaryValue')} against "
            f"{rollout.get('baselineValue')} (compared with the previous revision's {rollout.get('comparedWith')})",
        ]
        return lines, EXIT_ROLLED_BACK
    if update and update == st.get("currentRevision"):
        return [f'service "{name}" successfully rolled out (revision {update})'], 0
    ready = int(on_update.get("readyReplicas", 0))
    if phase == RolloutPhase.ANALYZING.value:
        return [f"Waiting for analysis of revision {update} on pod {rollout.get('canary') or '(starting)'}..."], 0
    return [f"Waiting for rollout to finish: {ready} of {desired} updated replicas are available..."], 0


def history_lines(revisions: Sequence[Mapping[str, Any]], ais: Mapping[str, Any]) -> list[str]:
    """What `rollout history` prints: the revisions by number, which are current, updated, rolled back."""
    st = ais.get("status") or {}
    rollout = st.get("rollout") or {}
    rows = [("REVISION", "NAME", "STATUS")]
    for r in sorted(revisions, key=lambda r: int(r.get("revision") or 0)):
        name = r["metadata"]["name"]
        marks = []
        if name == st.get("currentRevision"):
            marks.append("current")
        if name == st.get("updateRevision"):
            marks.append("update")
        if rollout.get("phase") == RolloutPhase.ROLLED_BACK.value and name.endswith(f"-{rollout.get('revision')}"):
            marks.append(f"rolled back ({rollout.get('signal')})")
        rows.append((str(r.get("revision")), name, ", ".join(marks)))
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    return [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}".rstrip() for a, b, c in rows]


def undo_patch(
    revisions: Sequence[Mapping[str, Any]], ais: Mapping[str, Any], *, to_revision: int | None = None
) -> tuple[list[dict[str, Any]], str]:
    """The JSON patch that writes a revision's spec back (keeping spec.replicas), and that revision's name.
    Default: the current revision when a rollout did not complete, else the one before it."""
    st = ais.get("status") or {}
    spec = ais.get("spec") or {}
    ordered = sorted(revisions, key=lambda r: int(r.get("revision") or 0))
    if to_revision is not None:
        chosen = next((r for r in ordered if int(r.get("revision") or 0) == to_revision), None)
        if chosen is None:
            raise LookupError(f"no revision {to_revision}")
    elif st.get("currentRevision") and st.get("currentRevision") != st.get("updateRevision"):
        chosen = next((r for r in ordered if r["metadata"]["name"] == st["currentRevision"]), None)
        if chosen is None:
            raise LookupError(f"revision {st['currentRevision']} is no longer kept")
    else:
        older = [r for r in ordered if r["metadata"]["name"] != st.get("updateRevision")]
        if not older:
            raise LookupError("no previous revision")
        chosen = older[-1]
    value = {**chosen["data"], "replicas": spec.get("replicas", chosen["data"].get("replicas", 1))}
    return [{"op": "replace", "path": "/spec", "value": value}], str(chosen["metadata"]["name"])


async def _run(args: argparse.Namespace) -> int:
    from ascend_operator.api.constants import LABEL_SERVICE
    from ascend_operator.clients.kube import KubeApi, load_config
    from ascend_operator.clients.resources import CONTROLLER_REVISION, SERVICE_CR

    load_config(args.kubeconfig or os.environ.get("KUBECONFIG"))
    kube = KubeApi()
    ais = await kube.get(SERVICE_CR, args.namespace, args.name, fresh=True)
    if ais is None:
        print(f'error: AscendInferenceService "{args.name}" not found in {args.namespace}', file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.action == "status":
        lines, code = status_lines(ais)
        print("\n".join(lines))
        return code
    revisions = await kube.list(CONTROLLER_REVISION, args.namespace, labels={LABEL_SERVICE: args.name})
    if args.action == "history":
        print("\n".join(history_lines(revisions, ais)))
        return 0
    try:
        patch, name = undo_patch(revisions, ais, to_revision=args.to_revision)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    await kube.patch(SERVICE_CR, args.namespace, args.name, patch)
    print(f'service "{args.name}" rolled back to {name}')
    return 0


def cmd_rollout(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("rollout", help="status, history and undo of a service's spec changes (as kubectl rollout)")
    p.add_argument("action", choices=("status", "history", "undo"))
    p.add_argument("name", help="the AscendInferenceService")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("--to-revision", type=int, default=None, help="undo: the revision number to go back to")
    p.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    p.set_defaults(func=cmd_rollout)
