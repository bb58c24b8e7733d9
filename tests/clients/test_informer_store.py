"""The watch cache's store (clients/informer.py): what a pass reads must never be older than what the
operator itself wrote, and a late watch event must never resurrect a pod the operator deleted."""

from typing import Any

import pytest

from ascend_operator.clients.informer import MAX_TOMBSTONES, Store, _events

LABEL = "inference.ascend.dev/service"


def pod(name: str, version: int | str | None, *, service: str = "svc", ns: str = "team", **meta: Any) -> dict[str, Any]:
    labels = {LABEL: service} if service else {}
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": version, "labels": labels, **meta}}


@pytest.fixture
def store() -> Store:
    return Store(index_label=LABEL)


def test_an_older_version_never_replaces_a_newer_one(store: Store) -> None:
    assert store.put(pod("svc-0", 12, gate="written"))  # what a patch returned (write-through)
    assert not store.put(pod("svc-0", 11))  # the watch's event of the version before
    assert not store.put(pod("svc-0", 12))  # and the watch's event of the same version
    assert store.get("team", "svc-0") == pod("svc-0", 12, gate="written")
    assert store.put(pod("svc-0", 13))


def test_a_late_event_does_not_resurrect_a_deleted_pod_but_a_new_incarnation_is_taken(store: Store) -> None:
    store.put(pod("svc-0", 5))
    assert store.remove(pod("svc-0", 9))
    assert not store.put(pod("svc-0", 7))  # a MODIFIED event from before the deletion, delivered late
    assert store.get("team", "svc-0") is None
    assert store.put(pod("svc-0", 20))  # the successor under the same name
    assert store.select("team", "svc") == [pod("svc-0", 20)]


def test_the_deletion_of_an_older_incarnation_keeps_the_newer_one(store: Store) -> None:
    store.put(pod("svc-0", 30))
    assert not store.remove(pod("svc-0", 25))
    assert store.get("team", "svc-0") == pod("svc-0", 30)


def test_a_deletion_without_a_version_is_a_tombstone_any_later_version_passes(store: Store) -> None:
    store.put(pod("svc-0", 3))
    assert store.remove({"metadata": {"namespace": "team", "name": "svc-0"}})  # what delete_pdb knows
    assert store.put(pod("svc-0", 4))


@pytest.mark.parametrize(
    ("new", "old", "taken"),
    [("abc", 5, True), (5, "abc", True), (None, 5, True), ("17", "9", True), ("9", "17", False)],
)
def test_versions_that_are_not_integers_count_as_newer(store: Store, new: Any, old: Any, taken: bool) -> None:
    store.put(pod("svc-0", old))
    assert store.put(pod("svc-0", new)) is taken


def test_the_index_follows_label_changes_and_namespaces(store: Store) -> None:
    store.put(pod("svc-1", 1))
    store.put(pod("svc-0", 2))
    store.put(pod("svc-0", 3, ns="other"))
    store.put(pod("x", 4, service=""))
    assert [p["metadata"]["name"] for p in store.select("team", "svc")] == ["svc-0", "svc-1"]
    store.put(pod("svc-1", 5, service="moved"))
    assert [p["metadata"]["name"] for p in store.select("team", "svc")] == ["svc-0"]
    assert [p["metadata"]["name"] for p in store.select("team", "moved")] == ["svc-1"]
    assert store.select("other", "svc") == [pod("svc-0", 3, ns="other")]
    assert store.get("team", "x") == pod("x", 4, service="")
    store.remove(pod("svc-0", 6))
    assert store.select("team", "svc") == []


def test_a_relist_of_one_namespace_reports_what_changed_and_keeps_the_others(store: Store) -> None:
    store.put(pod("a", 1))
    store.put(pod("b", 2))
    store.put(pod("c", 3, ns="other"))
    store.remove(pod("gone", 4))
    changed = store.replace([pod("a", 1), pod("d", 7)], namespace="team")
    assert sorted(p["metadata"]["name"] for p in changed) == ["b", "d"]
    assert [p["metadata"]["name"] for p in store.select("team", "svc")] == ["a", "d"]
    assert store.get("other", "c") == pod("c", 3, ns="other")
    assert store.put(pod("gone", 1))  # a relist is the whole truth: its tombstones go
    assert len(store) == 4


def test_tombstones_are_bounded(store: Store) -> None:
    for i in range(MAX_TOMBSTONES + 10):
        store.remove(pod(f"p{i}", 100))
    assert not store.put(pod(f"p{MAX_TOMBSTONES + 9}", 50))
    assert store.put(pod("p0", 50))  # the oldest tombstone was dropped


def test_watch_lines_become_events_and_an_expired_watch_raises_410() -> None:
    from kubernetes.client.exceptions import ApiException

    lines = [
        '{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "3"}}}',
        "",
        '{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}',
        '{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}',
    ]
    events = _events(iter(lines))
    assert [next(events).type, next(events).type] == ["ADDED", "BOOKMARK"]
    with pytest.raises(ApiException) as exc:
        next(events)
    assert exc.value.status == 410
