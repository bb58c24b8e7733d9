"""The health side of a judged rollout (controller/analysis.py): the window starts when the judged pod is
Ready, covers the same scrapes on both sides, extends on too little traffic, and with one replica compares
with the figures recorded before the change."""

import pytest

from ascend_operator.api.rollout import AnalysisSpec
from ascend_operator.controller.analysis import observe_rollout
from ascend_operator.controller.rollout_memory import Judging
from ascend_operator.controller.service_state import ServiceMemory
from ascend_operator.controller.views import PodView
from ascend_operator.health.samples import EngineSample
from ascend_operator.rollout_analysis import Outcome

BOUNDS = (0.1, 0.5, 1.0, 5.0, 10.0, float("inf"))
ANALYSIS = AnalysisSpec(seconds=10)


def pod(name: str, revision: str | None) -> PodView:
    return PodView(
        name=name, uid=name, replica=0, spec_hash=None, phase="Running", ready=True, terminating=False,
        node=None, ip="127.0.0.2", created=None, unschedulable=None, revision=revision,
    )  # fmt: skip


class Engine:
    """Cumulative counters of one engine: each tick, `rps` requests with first token after `ttft` s."""

    def __init__(self, ttft: float, rps: float, waiting: float = 0.0, idle_until: float = 0.0) -> None:
        self.ttft, self.rps, self.waiting, self.n, self.tokens = ttft, rps, waiting, 0.0, 0.0
        self.idle_until = idle_until

    def tick(self, t: float) -> EngineSample:
        if t < self.idle_until:  # just Ready: a few fast requests (the health canaries), nothing queued yet
            self.n += 1
            hist = tuple((b, self.n if b >= 0.1 else 0.0) for b in BOUNDS)
            return EngineSample(t=t, ttft=hist, tpot=tuple((b, self.n) for b in BOUNDS))
        self.n += self.rps
        self.tokens += self.rps * 100
        hist = tuple((b, self.n if self.ttft <= b else 0.0) for b in BOUNDS)
        tpot = tuple((b, self.n * 100) for b in BOUNDS)
        return EngineSample(t=t, running=8, waiting=self.waiting, generation_tokens=self.tokens, ttft=hist, tpot=tpot)


def run(
    memory: ServiceMemory, pods: list[PodView], engines: dict[str, Engine], *, until: float, start: float = 0.0
) -> None:
    t = start
    while t <= until and memory.rollout.concluded is None:
        samples = {p.uid: engines[p.uid].tick(t) for p in pods}
        ready = {p.uid for p in pods}
        observe_rollout(memory, ANALYSIS, live=pods, ready=ready, samples=samples, canary_failures={}, now=t)
        t += 1.0


def judging(memory: ServiceMemory) -> ServiceMemory:
    memory.rollout.judging = Judging(update="new", current="old", analysis=ANALYSIS)
    return memory


@pytest.mark.parametrize("previous", ["old", None], ids=["labelled", "made-before-revisions"])
def test_a_queueing_replica_fails_on_ttft_against_the_previous_ones(previous: str | None) -> None:
    memory = judging(ServiceMemory())
    pods = [pod("x-0", "new"), pod("x-1", previous), pod("x-2", previous)]
    engines = {"x-0": Engine(ttft=4.0, rps=3, waiting=8), "x-1": Engine(ttft=0.3, rps=3), "x-2": Engine(0.3, 3)}
    run(memory, pods, engines, until=60)
    done = memory.rollout.concluded
    assert done is not None
    assert (done.verdict.outcome, done.verdict.signal, done.compared_with) == (Outcome.FAILED, "TTFT", "replicas")
    assert done.canary == "x-0"


def test_a_quiet_window_is_extended_until_there_is_traffic() -> None:
    memory = judging(ServiceMemory())
    pods = [pod("x-0", "new"), pod("x-1", "old")]
    engines = {"x-0": Engine(ttft=0.3, rps=0.5), "x-1": Engine(ttft=0.3, rps=0.5)}
    run(memory, pods, engines, until=15)
    assert memory.rollout.concluded is None, "10 s at 0.5 requests/s is too little: extended"
    run(memory, pods, engines, start=16, until=60)  # the same window goes on (the start is kept)
    done = memory.rollout.concluded
    assert done is not None
    assert done.verdict.outcome is Outcome.PASSED


def test_one_replica_is_compared_with_the_figures_recorded_before_the_change() -> None:
    memory = ServiceMemory()
    memory.rollout.current = "old"
    run(memory, [pod("x-0", "old")], {"x-0": Engine(ttft=0.3, rps=3)}, until=25)
    assert "old" in memory.rollout.recorded
    judging(memory)
    run(memory, [pod("x-0b", "new")], {"x-0b": Engine(ttft=4.0, rps=3, waiting=6)}, start=30, until=60)
    done = memory.rollout.concluded
    assert done is not None
    assert (done.verdict.outcome, done.compared_with) == (Outcome.FAILED, "recorded")


def test_the_window_waits_until_the_new_pod_carries_its_share() -> None:
    """Clients move to a new pod as their requests end: judged from Ready, an idle pod passed a change that
    queues (seen at real engine speed); judged once it carries its share, it fails."""
    memory = judging(ServiceMemory())
    pods = [pod("x-0", "new"), pod("x-1", "old")]
    engines = {"x-0": Engine(ttft=4.0, rps=3, waiting=8, idle_until=30), "x-1": Engine(ttft=0.3, rps=3)}
    run(memory, pods, engines, until=90)
    done = memory.rollout.concluded
    assert done is not None
    assert (done.verdict.outcome, done.verdict.signal) == (Outcome.FAILED, "TTFT")


def test_a_host_freeze_one_side_missed_is_no_regression() -> None:
    """Both sides are judged over the same scrapes: a pass where a previous replica gave no sample adds
    nothing to either side. Seen in a cold CI run: the host stopped every process for ~50 s, the judged pod's
    first scrape after it answered and the previous replica's timed out, so the new side's span took in 50 s
    of no tokens and the old side's did not (51 against 261 tokens/s per running request): a neutral change
    rolled back. Here the engines do nothing for 50 s (no tick), then only the new pod answers."""
    memory = judging(ServiceMemory())
    pods = [pod("x-0", "new"), pod("x-1", "old")]
    engines = {"x-0": Engine(ttft=0.3, rps=3), "x-1": Engine(ttft=0.3, rps=3)}
    run(memory, pods, engines, until=8)
    assert memory.rollout.concluded is None
    ready = {p.uid for p in pods}
    after_freeze = {"x-0": engines["x-0"].tick(60.0), "x-1": None}
    observe_rollout(memory, ANALYSIS, live=pods, ready=ready, samples=after_freeze, canary_failures={}, now=60.0)
    run(memory, pods, engines, start=61, until=90)
    done = memory.rollout.concluded
    assert done is not None
    assert done.verdict.outcome is Outcome.PASSED, done.verdict
