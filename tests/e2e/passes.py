"""Counting the operator's own passes, from its Prometheus metrics: what an e2e test waits on instead of a
fixed sleep when it asserts that nothing happened (no second roll, no second event). A sleep asserts over
however many passes a loaded machine happened to run, maybe none; these wait until the operator has
really looked again.
"""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from harness.cluster import wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def metric_values(url: str, name: str, label: str | None = None) -> dict[str, float]:
    """The samples `name` on the Prometheus endpoint `url`, by the value of `label` (summed when None: "")."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "") if label else ""
                out[key] = out.get(key, 0.0) + sample.value
    return out


def passes(port: int) -> dict[str, float]:
    """Passes completed by each loop ("reconcile", "health") of the operator serving metrics on `port`."""
    return metric_values(f"http://127.0.0.1:{port}/metrics", "ascend_operator_pass_duration_seconds_count", "loop")


def more_passes(port: int, *, health: int, reconcile: int) -> None:
    """Wait until the operator on `port` has completed `health` more health passes and `reconcile` more
    reconcile passes: what it does in them is then in the status for the test to check (an event to wait
    on, where a fixed sleep would assert over however many passes a loaded machine happened to run)."""
    start = passes(port)

    def done() -> bool:
        now = passes(port)
        want = {"health": health, "reconcile": reconcile}
        return all(now.get(loop, 0.0) - start.get(loop, 0.0) >= n for loop, n in want.items())

    wait_for(done, timeout=120, message=f"{health} health and {reconcile} reconcile passes of the operator")
