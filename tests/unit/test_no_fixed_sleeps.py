"""No test waits a fixed time for an outcome: it polls the condition (harness/cluster.py `wait_for`) or freezes
time. A sleep outside a loop is allowed only where the duration is the test's subject (a hang held for so
long, an idle period whose CPU is measured, an outage the operator must ride out), each named below.

Why a test: a fixed wait is either too short on a loaded 2-core machine (a flaky failure) or too long on an
idle one (minutes of CI), and the suite grows with every feature. A sleep inside a loop is a polling interval
and is not counted.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLEEPS = {"time.sleep", "asyncio.sleep", "sleep"}
#: (file, function) -> why its fixed sleep is the subject, not a wait for an outcome.
SUBJECT = {
    ("tests/e2e/test_drills.py", "test_the_control_plane_killed_and_restarted_keeps_the_pods_and_the_roll_history"): (
        "the outage itself: several operator resyncs against a missing API server"
    ),
    ("tests/e2e/test_autoscaling.py", "test_a_lasting_queue_gets_a_second_replica_and_idle_returns_to_one"): (
        "the period both replicas serve the load, so the scale-down is judged after real traffic on both"
    ),
    ("tests/fidelity/prefill_share.py", "_once"): (
        "when the short prompts go out: a share of the long prompt's own solo prefill time, on both engines"
    ),
    ("tests/fidelity/scenario.py", "idle"): "the scenario's idle step between scrapes, on both engines alike",
    ("tests/fidelity/scenario.py", "_idle"): "the scenario's idle period, on both engines alike",
    ("tests/fidelity/scenario.py", "_chunked_prefill"): "the gap the scenario leaves before its prefill",
    ("tests/fidelity/scenario.py", "_hang_and_recovery"): "how long the scenario holds the engine hung",
    ("tests/health/test_monitor.py", "canary"): "a test double's canary latency",
    ("tests/real/test_real_engine.py", "hang"): "the hang held before /health is read (it must still say 200)",
    ("tests/sim/test_faults.py", "test_drift_raises_step_time_by_the_fraction_over_the_period"): (
        "the drift period the simulator ramps over"
    ),
    ("tests/sim/test_group.py", "test_a_hung_worker_stops_its_ranks_and_the_verdict_names_them"): (
        "past the leader's peer timeout, which is what is tested"
    ),
    ("tests/sim/test_processes.py", "test_twenty_instances_share_two_cores_and_idle_ones_use_no_cpu"): (
        "the idle period whose CPU use is measured"
    ),
    ("tests/sim/test_pd.py", "test_a_decode_request_whose_kv_arrived_stays_deferred_until_a_running_slot_frees"): (
        "the period over which the full decode engine is seen generating while one request stays deferred"
    ),
    ("tests/sim/test_request_stats.py", "test_a_request_sent_into_a_hang_is_queued_only_from_the_resume"): (
        "how long the engine is held hung"
    ),
    ("tests/sim/test_request_stats.py", "test_an_idle_engine_core_resumed_from_a_hang_steps_from_the_resume"): (
        "how long the engine is held hung"
    ),
}


def _walk(node: ast.AST, func: str, in_loop: bool) -> list[tuple[str, int]]:
    """(enclosing function, line) of each sleep with a non-zero duration outside any loop below `node`."""
    found = []
    for child in ast.iter_child_nodes(node):
        inner, loop = func, in_loop
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            inner, loop = child.name, False
        elif isinstance(child, ast.While | ast.For | ast.AsyncFor):
            loop = True
        elif (
            isinstance(child, ast.Call)
            and ast.unparse(child.func) in SLEEPS
            and not loop
            and not (child.args and ast.unparse(child.args[0]) == "0")  # sleep(0): a yield to the event loop
        ):
            found.append((inner, child.lineno))
        found += _walk(child, inner, loop)
    return found


def fixed_sleeps() -> dict[tuple[str, str], list[int]]:
    """(file, enclosing function) -> lines of sleeps with a non-zero duration outside any loop."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("harness/*.py")]):
        for func, line in _walk(ast.parse(path.read_text()), "<module>", False):
            found.setdefault((str(path.relative_to(ROOT)), func), []).append(line)
    return found


def test_no_test_waits_a_fixed_time_for_an_outcome() -> None:
    unexplained = sorted(
        f"{file}:{lines} in {func}" for (file, func), lines in fixed_sleeps().items() if (file, func) not in SUBJECT
    )
    assert not unexplained, f"poll the condition (wait_for) instead of sleeping: {unexplained}"


def test_every_allowance_is_still_needed() -> None:
    assert set(SUBJECT) <= set(fixed_sleeps()), set(SUBJECT) - set(fixed_sleeps())
