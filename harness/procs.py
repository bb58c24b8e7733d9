"""What /proc says of a process the harness started: its resident memory (the shared simulator's and the
scale runs' memory figures)."""


def rss_bytes(status_text: str) -> int:
    """VmRSS of /proc/<pid>/status, in bytes."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmRSS line (is the process a zombie?)")
