"""RFC 3339 timestamps as the API server writes them, to and from epoch seconds: roll records, drain
annotations and gate conditions are read back by a restarted operator, so they carry wall-clock time."""

import datetime


def iso(epoch: float) -> str:
    """RFC 3339 UTC."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(stamp: str | None) -> float | None:
    """Parse an RFC 3339 timestamp as the API server writes it; None for none or garbage."""
    if not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
