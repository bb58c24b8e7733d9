"""status.currentRevision, status.updateRevision, status.revisions and status.rollout: which spec each engine
pod runs and how the last spec change went.

Why revisions: a rollback must keep the pods on the previous spec while `spec` stays as the user wrote it,
so the operator keeps each spec it ran as a ControllerRevision (owned by the service, as a StatefulSet
does) and renders pods from the revision they should run; each pod carries its revision as a label. Why
`rollout`: a change judged on its first replica (spec.rollout.analysis) that was rolled back must say so
with the figures, and hold until the spec changes again or `aisctl rollout undo`.
"""

from enum import StrEnum

from pydantic import Field

from ascend_operator.api.base import ApiModel
from ascend_operator.api.reasons import RollReason


class RolloutPhase(StrEnum):
    """Where the rollout of status.updateRevision stands."""

    ANALYZING = "Analyzing"
    """One replica runs the new revision and is being judged; the others wait on the previous one."""
    PROGRESSING = "Progressing"
    """The rest of the replicas are replaced through the budget (passed, or no analysis)."""
    COMPLETE = "Complete"
    """Every replica runs status.updateRevision (it is now the current one)."""
    ROLLED_BACK = RollReason.ROLLED_BACK.value
    """The new revision's replica was worse: it went back to the current revision, and the rollout holds."""


class RevisionCount(ApiModel):
    """Engine pods of one revision."""

    revision: str = Field(description="The ControllerRevision (`<service>-<hash>`).")
    replicas: int = Field(default=0, description="Engine pods on it.")
    ready_replicas: int = Field(default=0, description="Of them, Ready.")


class RolloutStatus(ApiModel):
    """The rollout of the latest spec change."""

    phase: RolloutPhase = Field(description="Analyzing, Progressing, Complete or RolledBack.")
    revision: str = Field(description="The revision being rolled out (status.updateRevision when it started).")
    previous: str = Field(default="", description="The revision it replaces.")
    canary: str = Field(default="", description="The pod that ran the new revision first (with analysis).")
    canary_uid: str = Field(default="", description="Its uid (a successor of the same name has another).")
    started_at: str | None = Field(default=None, description="When the rollout started (RFC 3339).")
    finished_at: str | None = Field(default=None, description="When it completed or was rolled back.")
    compared_with: str = Field(
        default="",
        description="What the new replica was compared with: `replicas` (the previous revision's, same window) "
        "or `recorded` (one replica: the figures recorded before the change).",
    )
    signal: str = Field(default="", description="The signal that decided (RolledBack), or empty.")
    canary_value: float | None = Field(default=None, description="Its value on the new revision's replica.")
    baseline_value: float | None = Field(default=None, description="Its value on the previous revision.")
    message: str = Field(default="", description="The analysis' finding.")
