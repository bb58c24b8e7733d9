"""What the reconcile loop and the health loop of one service share about a rollout under judgement
(spec.rollout.analysis): its own module so `service_state` holds it without importing the rollout logic.

The reconcile loop says which revision is judged against which (`judging`); the health loop keeps the
window of scrapes of the judged replica and of the previous revision's replicas, and leaves its verdict in
`concluded`, which the reconcile loop turns into status.rollout. Lost on restart: a window restarts, and
the figures recorded for a one-replica service are recorded again."""

from dataclasses import dataclass, field

from ascend_operator.api.rollout import AnalysisSpec
from ascend_operator.controller.revisions import Revision
from ascend_operator.health.samples import EngineSample
from ascend_operator.rollout_analysis import AnalysisVerdict, Figures


@dataclass(frozen=True, kw_only=True)
class Judging:
    """The reconcile loop's word to the health loop: judge `update`'s one replica against `current`."""

    update: str
    current: str
    analysis: AnalysisSpec


@dataclass(kw_only=True)
class Window:
    """Scrapes of one window (pod uid -> its samples, oldest first), from `start` (monotonic seconds)."""

    revision: str
    start: float
    canary: str = ""
    canary_name: str = ""
    failures_at_start: int = 0
    samples: dict[str, list[EngineSample]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Concluded:
    """The health loop's verdict on one revision."""

    revision: str
    verdict: AnalysisVerdict
    compared_with: str
    canary: str


@dataclass
class RolloutMemory:
    revisions: dict[str, Revision] = field(default_factory=dict)
    """The service's ControllerRevisions by digest (controller/revisions.py)."""
    judging: Judging | None = None
    current: str | None = None
    """status.currentRevision as the reconcile loop last saw it (what a one-replica record is of)."""
    window: Window | None = None
    concluded: Concluded | None = None
    record: Window | None = None
    """The rolling window of the current revision's replicas while nothing is judged."""
    recorded: dict[str, Figures] = field(default_factory=dict)
    """Revision -> its replicas' figures over the last full window before a change (one replica: the
    judged replica is compared with these)."""
