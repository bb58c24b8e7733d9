"""One budget for every deletion: spec change, scale-down, duplicate, stall, drift and age.

Why one package: the reconcile loop (spec changes, scale-down) and the health loop (stall, drift, age)
used to delete pods from separate pod lists, so a spec change could take one replica while a health roll
took another. Both loops now hand their deletion candidates to `decide`, which sees every candidate and
every pod at once and returns one decision per pass (delete, drain or wait) with the rule that held each
of the others. Pure: no import of clients/ or controller/; times are wall-clock epoch seconds, because the
drain start and the roll history are read back from the API server after an operator restart.
"""

from ascend_operator.disruption.decide import Decision, DisruptionConfig, decide
from ascend_operator.disruption.model import (
    FORCE_REASONS,
    HEALTH_REASONS,
    HUNG_GRACE_SECONDS,
    HUNG_REASONS,
    KINDS,
    PLANNED_REASONS,
    POD_GONE,
    REMOVAL_REASONS,
    ROLL_RULES,
    SERVING_REASONS,
    Candidate,
    Delete,
    Drain,
    DrainResult,
    Held,
    Kind,
    PodState,
    RollReason,
)

__all__ = [
    "FORCE_REASONS",
    "HEALTH_REASONS",
    "HUNG_GRACE_SECONDS",
    "HUNG_REASONS",
    "KINDS",
    "PLANNED_REASONS",
    "POD_GONE",
    "REMOVAL_REASONS",
    "ROLL_RULES",
    "SERVING_REASONS",
    "Candidate",
    "Decision",
    "Delete",
    "DisruptionConfig",
    "Drain",
    "DrainResult",
    "Held",
    "Kind",
    "PodState",
    "RollReason",
    "decide",
]
