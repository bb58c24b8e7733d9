"""`aisctl rollout` output and the undo patch, from a service and its ControllerRevisions as the API
server returns them; `rollout status` waiting through a rollout as the operator writes it, read through the
in-memory API server (tests/fixtures/kube.py) with a frozen clock: each poll's sleep moves it, none waits."""

import argparse
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from ascend_operator.api.constants import KIND
from ascend_operator.cli.main import build_parser
from ascend_operator.cli.rollout import (
    EXIT_NO_REVISIONS,
    EXIT_NOT_FOUND,
    EXIT_ROLLED_BACK,
    EXIT_TIMEOUT,
    history_lines,
    rollout_state,
    run,
    undo_patch,
)
from tests.fixtures.examples import EXAMPLE
from tests.fixtures.kube import Call, FakeKube


def revision(number: int, digest: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": f"svc-{digest}"}, "revision": number, "data": {"replicas": 1, **spec}}


REVISIONS = [revision(1, "aaa", image="v1"), revision(2, "bbb", image="v2")]


def service(*, generation: int = 2, observed: int | None = None, replicas: int = 3, **status: Any) -> dict[str, Any]:
    """The service as read; the status as the operator writes it (observedGeneration: the spec it acted on,
    `generation` unless `observed` says an earlier one)."""
    return {
        "apiVersion": "inference.ascend.dev/v1alpha1",
        "kind": KIND,
        "metadata": {"name": "svc", "namespace": "ns", "generation": generation},
        "spec": {"replicas": replicas, "image": "v2", "rollout": {"analysis": {"seconds": 10}}},
        "status": {"observedGeneration": generation if observed is None else observed, **status},
    }


ROLLED_BACK_RECORD = {
    "phase": "RolledBack",
    "revision": "bbb",
    "signal": "TTFT",
    "canaryValue": 4.2,
    "baselineValue": 0.31,
    "comparedWith": "replicas",
    "message": "TTFT p90 4.200 s on the new replica against 0.310 s",
}
ROLLED_BACK = service(currentRevision="svc-aaa", updateRevision="svc-bbb", rollout=ROLLED_BACK_RECORD)


def test_status_of_a_rolled_back_change_names_the_signal_and_both_values() -> None:
    state = rollout_state(ROLLED_BACK)
    assert (state.done, state.code) == (True, EXIT_ROLLED_BACK)
    assert "svc-bbb rolled back to svc-aaa" in state.lines[0]
    assert "signal TTFT: new revision 4.2 against 0.31" in state.lines[1]


def test_status_of_a_complete_and_a_progressing_rollout() -> None:
    done = service(
        currentRevision="svc-bbb",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-bbb", "replicas": 3, "readyReplicas": 3}],
    )
    assert rollout_state(done).lines == ('service "svc" successfully rolled out (revision svc-bbb)',)
    assert rollout_state(done).done
    going = service(
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-bbb", "replicas": 2, "readyReplicas": 1}],
        rollout={"phase": "Progressing", "revision": "bbb"},
    )
    assert rollout_state(going).lines == (
        "Waiting for rollout to finish: 2 out of 3 new replicas have been updated...",
    )
    assert not rollout_state(going).done


def test_a_spec_change_the_operator_has_not_seen_is_not_called_complete() -> None:
    """Right after `kubectl apply`, the status still says the old revision is current and every replica runs
    it: that is the previous rollout's end, not this one's."""
    unseen = service(
        observed=1,
        currentRevision="svc-aaa",
        updateRevision="svc-aaa",
        revisions=[{"revision": "svc-aaa", "replicas": 3, "readyReplicas": 3}],
    )
    assert rollout_state(unseen).lines == ("Waiting for the service's spec update to be observed...",)
    assert not rollout_state(unseen).done


# A judged rollout of two replicas, as the operator writes it pass after pass: each GET of `rollout status`
# reads the next row (the last one stays).
SEEN_AAA = {"revision": "svc-aaa", "replicas": 2, "readyReplicas": 2}
JUDGED = [
    # the patch, before the operator's next pass (generation 2, status of generation 1)
    service(replicas=2, observed=1, currentRevision="svc-aaa", updateRevision="svc-aaa", revisions=[SEEN_AAA]),
    service(
        replicas=2,
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[SEEN_AAA],
        rollout={"phase": "Analyzing", "revision": "bbb"},
    ),
    service(
        replicas=2,
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-aaa", "replicas": 1, "readyReplicas": 1}, {"revision": "svc-bbb", "replicas": 1}],
        rollout={"phase": "Analyzing", "revision": "bbb", "canary": "svc-0"},
    ),
    service(  # the judged pod Ready: the same line, not printed again
        replicas=2,
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[
            {"revision": "svc-aaa", "replicas": 1, "readyReplicas": 1},
            {"revision": "svc-bbb", "replicas": 1, "readyReplicas": 1},
        ],
        rollout={"phase": "Analyzing", "revision": "bbb", "canary": "svc-0"},
    ),
    service(
        replicas=2,
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[
            {"revision": "svc-aaa", "replicas": 1, "readyReplicas": 1},
            {"revision": "svc-bbb", "replicas": 1, "readyReplicas": 1},
        ],
        rollout={"phase": "Progressing", "revision": "bbb", "canary": "svc-0"},
    ),
    service(
        replicas=2,
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-bbb", "replicas": 2, "readyReplicas": 1}],
        rollout={"phase": "Progressing", "revision": "bbb", "canary": "svc-0"},
    ),
    service(
        replicas=2,
        currentRevision="svc-bbb",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-bbb", "replicas": 2, "readyReplicas": 2}],
        rollout={"phase": "Complete", "revision": "bbb", "canary": "svc-0"},
    ),
]
WAITING = [
    "Waiting for the service's spec update to be observed...",
    "Waiting for the analysis of revision svc-bbb on pod (starting), a 10 s window under live traffic...",
    "Waiting for the analysis of revision svc-bbb on pod svc-0, a 10 s window under live traffic...",
    "Waiting for rollout to finish: 1 out of 2 new replicas have been updated...",
    "Waiting for 1 of 2 updated replicas to be ready...",
]


class FrozenClock:
    """Monotonic time that moves only when `rollout status` sleeps between two reads."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def served(rows: Sequence[Mapping[str, Any]]) -> FakeKube:
    """The API server holding the first row; each GET of the service first writes the next row into it."""
    kube = FakeKube()
    kube.add(rows[0])
    left = [copy.deepcopy(r["status"]) for r in rows[1:]]

    async def next_row(call: Call) -> None:
        stored = kube.obj(KIND, "svc")
        if stored is not None and left and len(kube.requests("get")) > 1:
            stored["status"] = left.pop(0)

    kube.before("get", KIND, next_row)
    return kube


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["rollout", *argv])


async def status(
    kube: FakeKube, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, list[str], str, FrozenClock]:
    clock = FrozenClock()
    code = await run(parsed("status", "svc", "-n", "ns", *argv), kube=kube, clock=clock, sleep=clock.sleep)
    said = capsys.readouterr()
    return code, said.out.splitlines(), said.err, clock


async def test_status_waits_through_a_judged_rollout_a_line_per_change(capsys: pytest.CaptureFixture[str]) -> None:
    kube = served(JUDGED)
    code, out, err, clock = await status(kube, capsys)
    assert code == 0
    assert out == [*WAITING, 'service "svc" successfully rolled out (revision svc-bbb)']
    assert err == ""
    assert len(kube.requests("get", kind=KIND)) == len(JUDGED)  # one read per pass, ending at Complete
    assert clock.slept == [1.0] * (len(JUDGED) - 1)


async def test_status_waiting_ends_non_zero_when_the_operator_rolls_the_change_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    back = service(
        replicas=2,
        currentRevision="svc-aaa",
        updateRevision="svc-bbb",
        revisions=[{"revision": "svc-aaa", "replicas": 2, "readyReplicas": 2}],
        rollout={**ROLLED_BACK_RECORD, "canary": "svc-0"},
    )
    code, out, _, _ = await status(served([*JUDGED[:3], back]), capsys)
    assert code == EXIT_ROLLED_BACK
    assert out[:3] == WAITING[:3]
    assert out[3] == (
        'service "svc" revision svc-bbb rolled back to svc-aaa: TTFT p90 4.200 s on the new replica against 0.310 s'
    )
    assert out[4] == "  signal TTFT: new revision 4.2 against 0.31 (compared with the previous revision's replicas)"


async def test_status_gives_up_at_the_timeout_saying_what_it_waited_for(capsys: pytest.CaptureFixture[str]) -> None:
    kube = served(JUDGED[:3])  # the judged pod never gets a verdict
    code, out, err, clock = await status(kube, capsys, "--timeout", "2.5s")
    assert code == EXIT_TIMEOUT
    assert out == WAITING[:3]
    assert clock.slept == [1.0, 1.0, 0.5]  # not a poll past the deadline
    assert err.strip() == ('error: timed out after 2.5 s waiting for the rollout of service "svc": ' + WAITING[2])


@pytest.mark.parametrize("flag", ["--watch=false", "-w=false", "-w=0"])
async def test_status_without_watch_reads_once(capsys: pytest.CaptureFixture[str], flag: str) -> None:
    kube = served(JUDGED[2:])
    code, out, _, clock = await status(kube, capsys, flag)
    assert (code, out, clock.slept) == (0, [WAITING[2]], [])
    assert len(kube.requests("get", kind=KIND)) == 1


async def test_status_of_a_service_that_is_gone_or_keeps_no_revisions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err, _ = await status(FakeKube(), capsys)
    assert (code, out) == (EXIT_NOT_FOUND, [])
    assert 'AscendInferenceService "svc" not found' in err
    kube = served(JUDGED[1:])

    async def delete_on_third_read(call: Call) -> None:
        if len(kube.requests("get")) == 3:
            kube.remove(KIND, "svc")

    kube.before("get", KIND, delete_on_third_read)
    code, out, err, _ = await status(kube, capsys)
    assert (code, out) == (EXIT_NOT_FOUND, WAITING[1:3])  # two reads, then gone
    assert 'AscendInferenceService "svc" not found' in err
    # the operator's own rule on the spec as written (render/desired.py why_no_revisions): the examples'
    for example, why in (("dsr1-2node", "a multi-node service"), ("dsv4-flash-pd", "a P/D parent")):
        keeps_none = service(replicas=2)
        keeps_none["spec"] = yaml.safe_load((EXAMPLE.parent / f"{example}.yaml").read_text())["spec"]
        code, out, err, _ = await status(served([keeps_none]), capsys)
        assert (code, out) == (EXIT_NO_REVISIONS, []), example
        assert f"keeps no revisions ({why}" in err


def test_timeout_and_watch_flags_read_as_kubectl_writes_them() -> None:
    assert parsed("status", "svc").watch is True
    assert parsed("status", "svc", "-w").watch is True
    assert parsed("status", "svc", "--watch=true").watch is True
    assert parsed("status", "svc", "--watch=false").watch is False
    assert parsed("status", "svc").timeout == 0
    assert [parsed("status", "svc", "--timeout", t).timeout for t in ("90s", "5m", "1h30m", "300ms", "45")] == [
        90,
        300,
        5400,
        0.3,
        45,
    ]
    for bad in (["--timeout", "5x"], ["--timeout", "m"], ["--watch=maybe"]):
        with pytest.raises(SystemExit):
            parsed("status", "svc", *bad)


def test_history_marks_current_update_and_rolled_back() -> None:
    lines = history_lines(REVISIONS, ROLLED_BACK)
    assert lines[0].split() == ["REVISION", "NAME", "STATUS"]
    assert lines[1].split() == ["1", "svc-aaa", "current"]
    assert lines[2].split(None, 2) == ["2", "svc-bbb", "update, rolled back (TTFT)"]


def test_undo_writes_the_current_revision_back_keeping_replicas() -> None:
    patch, name = undo_patch(REVISIONS, ROLLED_BACK)
    assert name == "svc-aaa"
    assert patch == [{"op": "replace", "path": "/spec", "value": {"replicas": 3, "image": "v1"}}]


def test_undo_after_a_complete_rollout_goes_to_the_one_before() -> None:
    done = service(currentRevision="svc-bbb", updateRevision="svc-bbb")
    assert undo_patch(REVISIONS, done)[1] == "svc-aaa"
    assert undo_patch(REVISIONS, done, to_revision=2)[1] == "svc-bbb"
    with pytest.raises(LookupError):
        undo_patch(REVISIONS, done, to_revision=7)
    with pytest.raises(LookupError):
        undo_patch(REVISIONS[1:], done)
