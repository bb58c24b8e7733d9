"""Kubelet probes and the readiness gate of the engine pod.

- startupProbe: `/health` every 10 s for `spec.health.startupGraceSeconds`: the kubelet waits out a
  multi-minute load of ~292 GB instead of restarting it; /health is fine for "the server is up".
- readinessProbe: the generation canary (`ascend_operator.canary`, standard library only, run with
  the engine image's python3 as an argument list). /health alone never makes a pod ready.
- no livenessProbe: the kubelet would restart-loop an engine the operator is judging; the operator rolls
  stalled engines itself, rate-limited.
- readiness gate `inference.ascend.dev/engine-ready`: set by the operator from its canary, the effective
  config check and the stall detector, so Service endpoints follow its judgement as well as the kubelet's.
"""

import math
from typing import Any

from ascend_operator import canary
from ascend_operator.api.constants import READINESS_GATE
from ascend_operator.api.spec import AscendInferenceServiceSpec

__all__ = ["READINESS_GATE", "probe_source", "readiness_probe", "startup_probe"]
STARTUP_PERIOD_SECONDS = 10


def probe_source() -> str:
    """Source of the stdlib-only canary probe: the one definition of forward progress, then the probe."""
    return canary.source()


def startup_probe(spec: AscendInferenceServiceSpec) -> dict[str, Any]:
    """`/health` until the engine is up, for as long as the startup grace."""
    grace = spec.health.startup_grace_seconds
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": STARTUP_PERIOD_SECONDS,
        "timeoutSeconds": 5,
        "failureThreshold": max(1, math.ceil(grace / STARTUP_PERIOD_SECONDS)),
    }


def readiness_probe(spec: AscendInferenceServiceSpec) -> dict[str, Any]:
    """The canary as an exec probe."""
    canary = spec.health.canary
    command = [
        "python3", "-c", probe_source(), str(spec.engine.port), spec.model.served_name,
        str(canary.max_tokens), str(canary.timeout_seconds), canary.prompt,
    ]  # fmt: skip
    return {
        "exec": {"command": command},
        "periodSeconds": max(1, math.ceil(canary.period_seconds)),
        # the canary, plus two /metrics reads when it times out, plus process start-up
        "timeoutSeconds": math.ceil(canary.timeout_seconds * 3) + 5,
        "failureThreshold": canary.failure_threshold,
        "successThreshold": 1,
    }
