"""The service's specs as ControllerRevisions: one per distinct engine spec it ran, owned by the service,
a bounded history (spec.rollout.revisionHistoryLimit besides the current and the updated one).

Why: a rollback (spec.rollout.analysis) keeps the pods on the previous spec while `spec` stays as the user
wrote it, so the previous spec must be kept somewhere the operator can render pods from after a restart;
`aisctl rollout history|undo` read the same objects, as kubectl does a StatefulSet's. A revision is named by
the engine digest (render/pod.py `spec_hash` without the key version: the pod's `revision` label), so a
change that does not touch the engine (replicas, router, health knobs) makes no revision, and a spec
changed back finds its old revision again (its number moves up, as kubectl's does).

The revisions are read once per service and process and kept in memory (a list per pass would be one more
API call per pass per service); a new digest lists them again before creating one.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ascend_operator.api.constants import LABEL_REVISION, LABEL_SERVICE
from ascend_operator.api.spec import AscendInferenceServiceSpec
from ascend_operator.clients.resources import CONTROLLER_REVISION, Kube
from ascend_operator.render.pod import Owner, owner_metadata, spec_hash


@dataclass(frozen=True, kw_only=True)
class Revision:
    """One stored spec."""

    name: str
    digest: str
    number: int
    spec: Mapping[str, Any]
    """The spec as the user wrote it (camelCase), what `aisctl rollout undo` writes back."""
    created: str | None = None


def revision_name(service: str, digest: str) -> str:
    return f"{service}-{digest}"


def revision_digest(spec: AscendInferenceServiceSpec) -> str:
    """The revision a spec renders to (the pod label's value)."""
    return spec_hash(spec)


def build_revision(raw_spec: Mapping[str, Any], *, owner: Owner, digest: str, number: int) -> dict[str, Any]:
    """The ControllerRevision of one spec."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(owner.name, digest),
            "namespace": owner.namespace,
            "labels": {LABEL_SERVICE: owner.name, LABEL_REVISION: digest},
            **owner_metadata(owner),
        },
        "data": dict(raw_spec),
        "revision": number,
    }


def read_revision(obj: Mapping[str, Any]) -> Revision | None:
    """A listed ControllerRevision, or None when it is not one of the operator's."""
    meta = obj.get("metadata") or {}
    digest = (meta.get("labels") or {}).get(LABEL_REVISION)
    data = obj.get("data")
    if not digest or not isinstance(data, dict):
        return None
    return Revision(
        name=str(meta.get("name", "")),
        digest=str(digest),
        number=int(obj.get("revision") or 0),
        spec=data,
        created=meta.get("creationTimestamp"),
    )


async def list_revisions(kube: Kube, owner: Owner) -> dict[str, Revision]:
    """The service's revisions by digest."""
    found = await kube.list(CONTROLLER_REVISION, owner.namespace, labels={LABEL_SERVICE: owner.name})
    return {r.digest: r for o in found if (r := read_revision(o)) is not None}


def to_prune(revisions: Mapping[str, Revision], *, keep: set[str], limit: int) -> list[Revision]:
    """The oldest revisions beyond `limit`, never one of `keep` (the current and the updated one)."""
    old = sorted((r for r in revisions.values() if r.digest not in keep), key=lambda r: r.number, reverse=True)
    return old[limit:]


async def ensure_revision(
    kube: Kube,
    owner: Owner,
    cache: dict[str, Revision],
    *,
    raw_spec: Mapping[str, Any],
    digest: str,
    keep: set[str],
    limit: int,
) -> dict[str, Revision]:
    """The revisions with `digest` among them (created, or found after a list), pruned to the limit."""
    if digest in cache:
        return cache
    cache.clear()
    cache.update(await list_revisions(kube, owner))
    if digest not in cache:
        number = max((r.number for r in cache.values()), default=0) + 1
        body = build_revision(raw_spec, owner=owner, digest=digest, number=number)
        await kube.create(body)
        cache[digest] = Revision(name=body["metadata"]["name"], digest=digest, number=number, spec=dict(raw_spec))
    for old in to_prune(cache, keep={*keep, digest}, limit=limit):
        await kube.delete(CONTROLLER_REVISION, owner.namespace, old.name)
        cache.pop(old.digest, None)
    return cache
