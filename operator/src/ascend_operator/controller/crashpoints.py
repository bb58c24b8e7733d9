"""Fault points for the reliability e2e tests: inert unless their environment variable is set.

`AIS_FAULT_AFTER_ROLL_RECORD=1` makes the operator SIGKILL itself after a roll record is written to the
service's status and before the pod is deleted: the window a crash must not turn into a lost record or a
deleted successor (tests/e2e/test_disruption.py). Read here and nowhere else; never set it in production.
"""

import os
import signal

FAULT_AFTER_ROLL_RECORD = "AIS_FAULT_AFTER_ROLL_RECORD"


def after_roll_record() -> None:
    """Die like a crashed process (no cleanup, no finalizers) when the fault point is armed."""
    if os.environ.get(FAULT_AFTER_ROLL_RECORD) == "1":
        os.kill(os.getpid(), signal.SIGKILL)
