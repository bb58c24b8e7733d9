"""A real engine's processes, found through /proc: vLLM renames its processes (VLLM::EngineCore,
VLLM::Worker), and `aissim attach` and the tests start every engine in a session (process group) of its own,
so the group of the API server listening on host:port holds exactly one engine's processes. Used to stop
one of them (SIGSTOP: the seed's hang, /health still 200) by PID, never by name.
"""

from __future__ import annotations

from pathlib import Path

from aissim import realengine


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _pgid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[2])


def group_members(pgid: int) -> dict[int, str]:
    """PID -> process title (vLLM renames its processes: VLLM::EngineCore, VLLM::Worker) of a group."""
    members = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _pgid(int(entry.name)) == pgid:
            members[int(entry.name)] = " ".join(_cmdline(int(entry.name)))
    return members


def engine_group(host: str, port: int) -> int | None:
    """The process group of the real engine listening on host:port (its leader's argv names both)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = _cmdline(int(entry.name))
        if realengine.API_SERVER in argv and _flag(argv, "--host") == host and _flag(argv, "--port") == str(port):
            return _pgid(int(entry.name))
    return None


def _flag(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None


def process(pgid: int, title: str) -> int:
    """The PID of the group's process whose title starts with `title` (e.g. "VLLM::EngineCore")."""
    found = [pid for pid, cmd in group_members(pgid).items() if cmd.startswith(title)]
    assert len(found) == 1, f"{title} in group {pgid}: {group_members(pgid)}"
    return found[0]


def attached_engine(attach_pid: int, ip: str) -> int:
    """The simulator process `aissim attach` (pid `attach_pid`, one process per pod) started for the pod at
    `ip`: its child whose environment binds it there (AIS_SIM_BIND_HOST)."""
    for task in Path(f"/proc/{attach_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
            if f"AIS_SIM_BIND_HOST={ip}".encode() in env:
                return int(child)
    raise AssertionError(f"no simulator of aissim attach (pid {attach_pid}) serves {ip}")
