"""Processes started beside a local cluster (the demo's operator, `aissim attach` and its engines), recorded
so that one `hack/local-cluster down DIR` stops them with the control plane.

Why it exists: `make demo DEMO_ARGS=--keep` leaves the operator and `aissim attach` running, and attach's
engines (simulators or real vLLM) run in process groups of their own. `down` used to stop only the control
plane it had started, so everything else kept running against a cluster that was gone. A caller records
each process it starts in DIR/attached/<name>.pid (`record`); `down` stops them first (`stop_attached`):
the recorded process's group and the group of every process descending from it, SIGTERM, a grace, then
SIGKILL, stopped (SIGSTOPped) members included. Only recorded PIDs and their descendants are signalled,
never processes found by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

ATTACHED = "attached"
#: Seconds the recorded groups get after SIGTERM (attach stops its engines in that time; vLLM takes seconds).
GRACE_SECONDS = 20.0


def record(directory: Path, name: str, pid: int, argv0: str) -> Path:
    """Write DIR/attached/<name>.pid: the PID and its argv[0] (checked before signalling: PIDs get reused)."""
    folder = directory / ATTACHED
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pid"
    path.write_text(f"{pid}\n{argv0}\n")
    return path


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), or None if gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields


def _argv0(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    except (FileNotFoundError, ProcessLookupError):
        return None


def recorded(directory: Path) -> dict[str, int]:
    """name -> PID of every recorded process still running what was recorded (empty when none)."""
    alive: dict[str, int] = {}
    for path in sorted((directory / ATTACHED).glob("*.pid")):
        pid_s, argv0, *_ = [*path.read_text().split("\n"), "", ""]
        pid = int(pid_s)
        if _stat(pid) is not None and _argv0(pid) == argv0:
            alive[path.stem] = pid
    return alive


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every live process."""
    table: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            table[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return table


def targets_of(roots: list[int]) -> tuple[set[int], set[int]]:
    """(process groups, single PIDs) covering `roots` and every process descending from them: a process
    that leads its group (the demo starts each recorded process in a session of its own, and attach each
    engine) is signalled with its whole group, so an engine's EngineCore and workers go too; any other
    descendant on its own, never the group it merely belongs to."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    groups: set[int] = set()
    singles: set[int] = set()
    todo = [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        (groups if table[pid][1] == pid else singles).add(pid)
        todo += children.get(pid, [])
    groups.discard(os.getpgrp())  # never the caller's own group
    return groups, singles - {os.getpid()}


def _alive(groups: set[int], singles: set[int]) -> tuple[set[int], set[int]]:
    table = _processes()
    return {pgid for _, pgid in table.values()} & groups, singles & table.keys()


def _signal(groups: set[int], singles: set[int], sig: int) -> None:
    for kill, ids in ((os.killpg, groups), (os.kill, singles)):
        for target in ids:
            with contextlib.suppress(ProcessLookupError):
                kill(target, sig)
                if sig != signal.SIGKILL:  # a SIGSTOPped member acts on SIGTERM only once continued
                    kill(target, signal.SIGCONT)


def stop_attached(directory: Path, *, log: Callable[[str], None] = print) -> list[int]:
    """Stop every recorded process of DIR and all that descends from it; return the recorded PIDs stopped."""
    alive = recorded(directory)
    if not alive:
        return []
    groups, singles = targets_of(list(alive.values()))
    _signal(groups, singles, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while any(_alive(groups, singles)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left_groups, left_singles = _alive(groups, singles)
    if left_groups or left_singles:
        _signal(left_groups, left_singles, signal.SIGKILL)
        while any(_alive(left_groups, left_singles)):
            time.sleep(0.05)
    for name, pid in alive.items():
        log(f"stopped {name} (pid {pid}, {len(groups)} process groups and {len(singles)} other processes in all)")
    return sorted(alive.values())
