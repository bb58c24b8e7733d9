"""`aisctl rollout status|history|undo NAME`: a service's revisions as kubectl shows a StatefulSet's.

Why: a change judged on its first replica (spec.rollout.analysis) may be rolled back by the operator while
the spec still says what was asked; `status` waits for the rollout as `kubectl rollout status` does (a line
each time the state it reads changes, exit 0 once every replica runs the updated revision and is Ready) and
fails with the signal and both values when the operator rolled it back, `history` lists the revisions the
operator keeps (ControllerRevisions it owns), and `undo` writes a revision's spec back into the service (the
previous one by default, `--to-revision N` another), keeping spec.replicas: after undo the spec and the pods
agree again, without a second rollout when the pods already run it.

`status` polls the service (one GET a second): the operator writes everything it says into the service's
status, so nothing else needs watching. Exit codes: 0 complete (or `--watch=false`), 1 rolled back,
2 no such service or one that keeps no revisions (multi-node, a P/D parent), 3 `--timeout` passed.
"""

import argparse
import asyncio
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.parse import SpecError, parse_spec
from ascend_operator.api.revision import RolloutPhase
from ascend_operator.render.desired import why_no_revisions

EXIT_ROLLED_BACK = 1
EXIT_NOT_FOUND = 2
EXIT_NO_REVISIONS = 2
EXIT_TIMEOUT = 3
#: Seconds between two reads of the service while `status` waits.
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class RolloutState:
    """What `rollout status` says of a service as read: its lines, whether waiting is over, the exit code."""

    lines: tuple[str, ...]
    done: bool
    code: int = 0
    error: bool = False
    """The lines go to stderr: the service cannot be waited for this way."""


def _no_revisions(spec: Mapping[str, Any]) -> str | None:
    """Why a service keeps no revisions (render/desired.py, the rule the reconcile pass applies), or None.
    A spec that does not parse is waited for as it stands (its Ready condition names the field)."""
    try:
        return why_no_revisions(parse_spec(spec))
    except SpecError:
        return None


def rollout_state(ais: Mapping[str, Any]) -> RolloutState:
    """What `rollout status` says of a service as read (kubectl's StatefulSet status viewer, for revisions)."""
    name = ais["metadata"]["name"]
    spec = ais.get("spec") or {}
    st = ais.get("status") or {}
    if (why := _no_revisions(spec)) is not None:
        line = f'error: service "{name}" keeps no revisions ({why}); wait with kubectl wait --for=condition=Ready'
        return RolloutState((line,), True, EXIT_NO_REVISIONS, error=True)
    generation, observed = ais["metadata"].get("generation"), st.get("observedGeneration")
    update, current = str(st.get("updateRevision") or ""), str(st.get("currentRevision") or "")
    if observed is None or (generation is not None and int(observed) < int(generation)) or not update:
        return RolloutState(("Waiting for the service's spec update to be observed...",), False)
    rollout = st.get("rollout") or {}
    ours = bool(rollout.get("revision")) and update.endswith(f"-{rollout.get('revision')}")
    phase = rollout.get("phase") if ours else None
    if phase == RolloutPhase.ROLLED_BACK.value:
        lines = (
            f'service "{name}" revision {update} rolled back to {current}: {rollout.get("message")}',
            f"  signal {rollout.get('signal')}: new revision {rollout.get('canaryValue')} against "
            f"{rollout.get('baselineValue')} (compared with the previous revision's {rollout.get('comparedWith')})",
        )
        return RolloutState(lines, True, EXIT_ROLLED_BACK)
    desired = int(spec.get("replicas", 1))
    counts = {c.get("revision"): c for c in st.get("revisions") or []}
    on_update = counts.get(update) or {}
    updated, ready = int(on_update.get("replicas", 0)), int(on_update.get("readyReplicas", 0))
    if update == current and not on_update:  # pods made before revisions were recorded run the current one
        ready = int(st.get("readyReplicas", 0))
    if phase == RolloutPhase.ANALYZING.value:
        window = ((spec.get("rollout") or {}).get("analysis") or {}).get("seconds")
        over = f", a {window:g} s window under live traffic" if isinstance(window, int | float) else ""
        pod = rollout.get("canary") or "(starting)"
        return RolloutState((f"Waiting for the analysis of revision {update} on pod {pod}{over}...",), False)
    if update != current and updated < desired:
        line = f"Waiting for rollout to finish: {updated} out of {desired} new replicas have been updated..."
        return RolloutState((line,), False)
    if ready < desired:
        return RolloutState((f"Waiting for {desired - ready} of {desired} updated replicas to be ready...",), False)
    if update != current:
        return RolloutState((f"Waiting for the operator to record revision {update} as current...",), False)
    return RolloutState((f'service "{name}" successfully rolled out (revision {update})',), True)


async def wait_status(
    read: Callable[[], Awaitable[Mapping[str, Any] | None]],
    *,
    name: str,
    watch: bool,
    timeout: float,
    out: Callable[[str], None],
    err: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    interval: float = POLL_SECONDS,
) -> int:
    """`rollout status`: read the service until its rollout is over (once without `watch`), printing each
    new state; the exit code. `timeout` 0 waits for ever, as kubectl's."""
    deadline = clock() + timeout if timeout > 0 else None
    said: tuple[str, ...] = ()
    while True:
        ais = await read()
        if ais is None:
            err(f'error: AscendInferenceService "{name}" not found')
            return EXIT_NOT_FOUND
        state = rollout_state(ais)
        if state.lines != said:
            for line in state.lines:
                (err if state.error else out)(line)
            said = state.lines
        if state.done or not watch:
            return state.code
        left = None if deadline is None else deadline - clock()
        if left is not None and left <= 0:
            err(f'error: timed out after {timeout:g} s waiting for the rollout of service "{name}": {said[-1]}')
            return EXIT_TIMEOUT
        await sleep(interval if left is None else min(interval, left))


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


async def run(
    args: argparse.Namespace,
    *,
    kube: Any = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """One subcommand against the API server (`kube`: a client with KubeApi's verbs, made when None)."""
    from ascend_operator.api.constants import LABEL_SERVICE
    from ascend_operator.clients.resources import CONTROLLER_REVISION, SERVICE_CR

    if kube is None:
        from ascend_operator.clients.kube import KubeApi, load_config

        load_config(args.kubeconfig or os.environ.get("KUBECONFIG"))
        kube = KubeApi()

    async def read() -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = await kube.get(SERVICE_CR, args.namespace, args.name, fresh=True)
        return found

    if args.action == "status":
        return await wait_status(
            read,
            name=args.name,
            watch=args.watch,
            timeout=args.timeout,
            out=lambda line: print(line, flush=True),
            err=lambda line: print(line, file=sys.stderr, flush=True),
            clock=clock,
            sleep=sleep,
        )
    ais = await read()
    if ais is None:
        print(f'error: AscendInferenceService "{args.name}" not found in {args.namespace}', file=sys.stderr)
        return EXIT_NOT_FOUND
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
    return asyncio.run(run(args))


def boolean(text: str) -> bool:
    """A flag's value as kubectl's (Go's strconv.ParseBool): `--watch=false`, `-w=0`."""
    words = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}
    if text.lower() not in words:
        raise argparse.ArgumentTypeError(f"not a boolean: {text!r} (true or false)")
    return words[text.lower()]


_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds of a kubectl duration (`90s`, `5m`, `1h30m`, `0` for ever; a bare number is seconds)."""
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (such as 90s, 5m, 1h30m)")
    return sum(float(n) * _UNIT[u] for n, u in parts)


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "rollout",
        help="status, history and undo of a service's spec changes (as kubectl rollout)",
        epilog="status exits 0 once the rollout is complete, 1 when the operator rolled it back, "
        "2 for a service it cannot follow, 3 when --timeout passed.",
    )
    p.add_argument("action", choices=("status", "history", "undo"))
    p.add_argument("name", help="the AscendInferenceService")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument(
        "-w",
        "--watch",
        type=boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="status: wait until the rollout is over, a line per change (default); --watch=false prints it once",
    )
    p.add_argument(
        "--timeout",
        type=duration,
        default=0.0,
        help="status: give up after this long (90s, 5m; default 0: wait for ever), exit 3",
    )
    p.add_argument("--to-revision", type=int, default=None, help="undo: the revision number to go back to")
    p.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    p.set_defaults(func=cmd_rollout)
