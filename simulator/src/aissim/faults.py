"""Fault model: the ways the seed's engine misbehaved, switchable at start and at run time.

Why this module exists: health checking is only proved against an engine that can fail the way the seed's
did while still looking alive: a long request pushing KV past 97.5% and stalling forward progress with
/health at 200 (`stall-at-kv`), everything stopping (`hang`), throughput decaying ~18% over a long uptime
(`drift`), the process dying (`crash`), and, between a prefill and a decode engine, a KV transfer that
never completes (`kv-transfer-hang`, aissim/kvtransfer.py) while both engines answer, and the engine's node
gone (`unreachable`: a server that lost power or its network; nothing answers, not /health, not /metrics,
and the engine takes no step: aissim/server.py holds every request but /sim/*, as a dead link holds the
connection until the client gives up; one process can stop one pod this way, where SIGSTOP would stop
every engine of `aissim attach --shared`). `slow-start` and
`drop-args` act before the engine exists and are start flags (`--sim-load-seconds`, `--sim-drop-args`); this
module parses both the flag form (`name:key=value,key=value`) and the JSON form of `POST /sim/faults`, and
answers the engine's questions (step-time multiplier, may it step now) as pure functions of the fault state
and engine time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aissim.calibration import DRIFT_FRACTION, DRIFT_PERIOD_S, STALL_KV_THRESHOLD

RUNTIME_FAULTS = ("stall-at-kv", "hang", "drift", "crash", "kv-transfer-hang", "unreachable")
START_ONLY_FAULTS = ("slow-start", "drop-args")


class FaultError(ValueError):
    """A fault request that cannot be applied (unknown name, bad parameter)."""


@dataclass(frozen=True)
class Fault:
    """One active fault; `since` is the engine time it was set (drift grows from there)."""

    name: str
    params: dict[str, float]
    since: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {"fault": self.name, **self.params, "since_engine_s": round(self.since, 3)}


def _float(params: Mapping[str, Any], key: str, default: float) -> float:
    raw = params.get(key, default)
    try:
        return float(raw)
    except (TypeError, ValueError) as exc:
        raise FaultError(f"{key}: expected a number, got {raw!r}") from exc


def make_fault(name: str, params: Mapping[str, Any], *, now: float) -> Fault:
    """Validate a fault request and fill the seed's defaults."""
    if name in START_ONLY_FAULTS:
        raise FaultError(
            f"{name} acts before the engine exists: start with "
            + ("--sim-load-seconds N" if name == "slow-start" else "--sim-drop-args FLAG[,FLAG]")
        )
    if name == "stall-at-kv":
        threshold = _float(params, "threshold", STALL_KV_THRESHOLD)
        if not 0.0 < threshold <= 1.0:
            raise FaultError("threshold must be in (0, 1]")
        return Fault(name, {"threshold": threshold}, now)
    if name in ("hang", "kv-transfer-hang", "unreachable"):
        return Fault(name, {}, now)
    if name == "drift":
        fraction = _float(params, "fraction", DRIFT_FRACTION)
        period = _float(params, "period_s", DRIFT_PERIOD_S)
        if fraction < 0 or period <= 0:
            raise FaultError("drift needs fraction >= 0 and period_s > 0")
        return Fault(name, {"fraction": fraction, "period_s": period}, now)
    if name == "crash":
        code = int(_float(params, "exit_code", 1))
        if code == 0:
            raise FaultError("crash exit_code must be non-zero")
        return Fault(name, {"exit_code": code, "after_s": _float(params, "after_s", 0.0)}, now)
    raise FaultError(f"unknown fault {name!r}; known: {', '.join(RUNTIME_FAULTS + START_ONLY_FAULTS)}")


def parse_fault_flag(spec: str, *, now: float = 0.0) -> Fault:
    """`stall-at-kv:threshold=0.975`, `drift:fraction=0.18,period_s=600`, `hang`, `crash:exit_code=3`."""
    name, _, rest = spec.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise FaultError(f"fault parameter {item!r}: expected key=value")
        params[key.strip()] = value.strip()
    return make_fault(name.strip(), params, now=now)


def parse_fault_json(body: Any, *, now: float) -> Fault:
    if not isinstance(body, dict) or not isinstance(body.get("fault"), str):
        raise FaultError('expected a JSON object like {"fault": "stall-at-kv", "threshold": 0.975}')
    params = {k: v for k, v in body.items() if k != "fault"}
    return make_fault(body["fault"], params, now=now)


class FaultState:
    """The active faults, one per kind; setting a kind again replaces it."""

    def __init__(self) -> None:
        self._faults: dict[str, Fault] = {}

    def set(self, fault: Fault) -> None:
        self._faults[fault.name] = fault

    def clear(self, name: str | None = None) -> list[str]:
        if name is None:
            names = list(self._faults)
            self._faults.clear()
            return names
        return [name] if self._faults.pop(name, None) else []

    def get(self, name: str) -> Fault | None:
        return self._faults.get(name)

    def describe(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self._faults.values()]

    @property
    def hung(self) -> bool:
        """No engine step: `hang`, or `unreachable` (the node is gone, its engine with it)."""
        return "hang" in self._faults or self.unreachable

    @property
    def unreachable(self) -> bool:
        """Nothing answers but the simulator's own /sim/* routes (how the harness takes the fault back)."""
        return "unreachable" in self._faults

    def stalled(self, *, kv_usage: float) -> bool:
        """stall-at-kv: no forward progress once usage has passed the threshold."""
        fault = self._faults.get("stall-at-kv")
        return fault is not None and kv_usage >= fault.params["threshold"]

    def step_multiplier(self, *, now: float) -> float:
        """drift: step time grows linearly by `fraction` over `period_s` engine seconds, then stays."""
        fault = self._faults.get("drift")
        if fault is None:
            return 1.0
        progress = min(1.0, max(0.0, (now - fault.since) / fault.params["period_s"]))
        return 1.0 + fault.params["fraction"] * progress
