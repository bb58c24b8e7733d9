"""Why the operator deleted a pod and how it left: the one list of each, in the API because users read them.

Why here and not beside the decision that uses it: `status.rolls[].reason` is part of the API, so the CRD's
schema enumerates these values (a reason outside the list is refused by the API server, and a user can see
every possible value with `kubectl explain`), and docs/api.md lists them from these enums. What the
decision does with each reason is its row in `ascend_operator.disruption.model.KINDS`, which imports this
enum (tests/disruption/test_one_place.py: every member has a row).
"""

from enum import StrEnum


class RollReason(StrEnum):
    """Why a pod is deleted (status.rolls, events and the `ascend_operator_rolls_total{reason}` series). Each
    member is one kind of deletion; what the decision does with it is its row in disruption/model.py."""

    STALLED = "Stalled"
    DRIFT = "ThroughputDrift"
    MAX_AGE = "MaxAge"
    SPEC_CHANGED = "SpecChanged"
    SCALE_DOWN = "ScaleDown"
    DUPLICATE = "Duplicate"
    TOPOLOGY_CHANGED = "TopologyChanged"
    NPU_FAULT = "NPUFault"
    NPU_PRE_SEPARATE = "NPUPreSeparate"
    NODE_UNHEALTHY = "NodeUnhealthy"
    GROUP_RECREATED = "GroupRecreated"
    NODE_LOST = "NodeLost"
    ROLLED_BACK = "RolledBack"


class DrainResult(StrEnum):
    """How the pod left (status.rolls[].drain; empty on records written before drains were recorded)."""

    COMPLETED = "Completed"
    """Its running and waiting requests reached 0 after the gate went False."""
    TIMED_OUT = "TimedOut"
    """spec.rollout.drainSeconds passed with requests still in flight."""
    NOT_DRAINED = "NotDrained"
    """It served nobody (not Ready: stalled, crashed, loading) or stopped answering while draining."""
