"""`aisctl bench` against simulator subprocesses with the seed's production args (synthetic acceptance).

What a user would see: the sweep and the clean-prefill scan PASS with the seed's TP8 figures (within the
simulator's calibration), a rerun with a reused --seed is refused as cache-contaminated, an engine that
crashes mid-run makes the run FAIL with a non-zero exit, and A/B compares DSpark5 with DSpark7 in one
session. Times are the simulator's engine seconds (the bench reads its clock from /sim/state).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aissim import calibration as cal
from ascend_operator.cli.main import main
from tests.sim.conftest import Proc, base_args

SPEC5 = '{"method":"dspark","num_speculative_tokens":5,"enforce_eager":true}'
Spawn = Callable[..., list[Proc]]


def sim_args(scale: float, *extra: str) -> list[str]:
    return base_args("--sim-acceptance-profile", "synthetic", "--enable-prompt-tokens-details", *extra, scale=scale)


def bench(tmp_path: Path, name: str, *argv: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / name
    code = main(["bench", *argv, "--out", str(out), "--no-progress"])
    return code, json.loads((out / "result.json").read_text())


def by_label(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["label"]: p for p in result["points"]}


def test_sweep_passes_with_the_seed_tp8_figures(spawn: Spawn, tmp_path: Path) -> None:
    (proc,) = spawn(sim_args(100.0))
    code, result = bench(
        tmp_path,
        "sweep",
        "sweep",
        "--url",
        proc.base,
        "--concurrency",
        "1,8,32,64",
        "--input-tokens",
        str(cal.SWEEP_PROMPT_TOKENS),
        "--output-tokens",
        str(cal.SWEEP_OUTPUT_TOKENS),
    )
    assert (code, result["verdict"], result["failed"]) == (0, "PASS", [])
    assert result["endpoints"]["engine"]["clock"] == "aissim"
    assert result["endpoints"]["engine"]["cache_config"]["block_size"] == "8"
    points = by_label(result)
    for conc in (1, 8, 32, 64):
        seed_tok_s, seed_tpot = cal.TP8_SWEEP[conc]
        point = points[f"C{conc}"]
        assert point["requests"] == point["engine"]["finished"] == 2 * conc
        assert point["output_tok_s"] == pytest.approx(seed_tok_s, rel=0.15), conc
        assert point["engine"]["tpot_mean_s"] == pytest.approx(seed_tpot, rel=0.15), conc
        assert point["lengths"]["completion_tokens_min"] == point["lengths"]["completion_tokens_max"] == 512
    # C32 -> C64 adds no throughput and TTFT jumps (requests 33..64 wait for a slot), as in the seed.
    assert points["C64"]["engine"]["ttft_mean_s"] > 3 * points["C32"]["engine"]["ttft_mean_s"]
    assert (tmp_path / "sweep" / "result.png").stat().st_size > 10_000
    assert "| engine | C64 | 64 |" in (tmp_path / "sweep" / "result.md").read_text()


def test_prefill_scan_passes_and_a_reused_seed_is_flagged(spawn: Spawn, tmp_path: Path) -> None:
    (proc,) = spawn(sim_args(2000.0))
    argv = ["prefill", "--url", proc.base, "--contexts", "8k,32k,64k", "--seed", "4242"]
    code, clean = bench(tmp_path, "clean", *argv)
    assert (code, clean["verdict"]) == (0, "PASS")
    points = by_label(clean)
    for context, seed_s in cal.TP8_PREFILL_S[:3]:
        point = points[f"{context // 1024}K"]
        assert point["engine"]["ttft_mean_s"] == pytest.approx(seed_s, rel=0.10), context
        assert point["lengths"]["prompt_tokens_mean"] == pytest.approx(context, rel=0.02)
        assert point["engine"]["prefix_cache_hit_rate"] == 0.0
    # The seed's pitfall: same seed, same prompts, the prefix cache answers and TTFT looks absurdly fast.
    code, again = bench(tmp_path, "again", *argv)
    assert code == 1
    assert again["verdict"] == "FAIL"
    assert set(again["failed"]) == {"8K:prefix_cache_clean", "32K:prefix_cache_clean", "64K:prefix_cache_clean"}
    assert by_label(again)["64K"]["engine"]["ttft_mean_s"] < 0.2 * by_label(clean)["64K"]["engine"]["ttft_mean_s"]


def _crash_when(base: str, finished: int) -> threading.Thread:
    """Crash the simulator once the engine has finished `finished` requests (mid-run, not before it)."""

    def run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with urllib.request.urlopen(base + "/metrics", timeout=5) as resp:
                text = resp.read().decode()
            done = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("vllm:request_success_total")
            )
            if done >= finished:
                body = json.dumps({"fault": "crash", "exit_code": 3}).encode()
                req = urllib.request.Request(
                    base + "/sim/faults", data=body, headers={"Content-Type": "application/json"}
                )
                urllib.request.urlopen(req, timeout=5).close()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_crash_mid_run_is_fail_with_non_zero_exit(spawn: Spawn, tmp_path: Path) -> None:
    (proc,) = spawn(sim_args(50.0))
    watcher = _crash_when(proc.base, finished=2 + 4)  # the 2 calibration probes, then 4 measured requests
    code, result = bench(tmp_path, "crash", "sweep", "--url", proc.base, "--concurrency", "4", "--rounds", "6")
    watcher.join(timeout=5)
    assert proc.popen.wait(timeout=10) == 3
    assert (code, result["verdict"]) == (1, "FAIL")
    assert {"C4:requests_succeeded", "C4:no_engine_restart", "result_complete"} <= set(result["failed"])


def test_ab_compares_dspark5_with_dspark7_in_one_session(spawn: Spawn, tmp_path: Path) -> None:
    args5 = sim_args(100.0)
    args5[args5.index("--speculative-config") + 1] = SPEC5
    p5, p7 = spawn(args5, sim_args(100.0))
    code, result = bench(
        tmp_path,
        "ab",
        "ab",
        "--url-a",
        p5.base,
        "--url-b",
        p7.base,
        "--label-a",
        "dspark5",
        "--label-b",
        "dspark7",
        "--concurrency",
        "32",
        "--rounds",
        "4",
        "--input-tokens",
        "256",
        "--output-tokens",
        "256",
    )
    assert (code, result["verdict"]) == (0, "PASS")
    # Interleaved rounds in one session: A B, B A, A B, B A.
    order = [p["endpoint"] for p in result["points"]]
    assert order == ["dspark5", "dspark7", "dspark7", "dspark5", "dspark5", "dspark7", "dspark7", "dspark5"]
    summary = result["ab"]
    assert summary["sides"]["dspark5"]["rounds"] == summary["sides"]["dspark7"]["rounds"] == 4
    # Fixed output keeps the noise small (the seed: 2-3% with ignore_eos + fixed max_tokens); at 100x engine
    # speed the host's own noise adds to it (a cold CI run with Go builds beside it read 5.58%).
    assert summary["sides"]["dspark7"]["output_tok_s"]["stdev_pct"] < 10
    assert summary["b_vs_a_pct"]["output_tok_s"] is not None
    cfg = result["endpoints"]
    assert cfg["dspark5"]["url"] != cfg["dspark7"]["url"]


def test_mixed_reports_the_long_request_beside_short_ones(spawn: Spawn, tmp_path: Path) -> None:
    # A low scale: a wall-clock gap between two tokens is multiplied by it, and this host is shared.
    (proc,) = spawn(sim_args(20.0))
    code, result = bench(
        tmp_path,
        "mixed",
        "mixed",
        "--url",
        proc.base,
        "--long-context",
        "64k",
        "--long-output",
        "256",
        "--short",
        "7",
        "--short-rounds",
        "2",
        "--short-input",
        "1024",
        "--short-output",
        "128",
    )
    assert (code, result["verdict"]) == (0, "PASS")
    mixed = result["mixed"]["engine"]
    assert mixed["long_ok"]
    assert mixed["long_progressing"]
    assert mixed["long_completion_tokens"] == 256
    assert mixed["long_decode_tok_s"] > 0
    assert mixed["long_decode_target_tok_s"] == 50.0
    assert mixed["short_ttft_p99_s"] >= mixed["short_ttft_p50_s"] > 0
    assert mixed["kv_peak"] > 0
    assert result["points"][0]["requests"] == 1 + 7 * 2
    # The short workers start once the long request's stream is open: it reached the engine first (the seed's
    # question is short prompts arriving during its prefill), on the engine's clock.
    timeline = mixed["timeline"]
    assert timeline["long"]["sent_s"] <= min(sent for sent, _ in timeline["shorts"])


def test_mixed_baseline_judges_the_seed_criteria_with_the_long_request_on_its_own_engine(
    spawn: Spawn, tmp_path: Path
) -> None:
    """--baseline measures the references (the long request alone, the short workers alone) in the same
    session; --long-url sends the long request to another engine, whose counters the rules then include."""
    shorts, long_engine = spawn(sim_args(20.0), sim_args(20.0))
    code, result = bench(
        tmp_path, "mixed", "mixed", "--url", shorts.base, "--long-url", long_engine.base, "--baseline",
        "--long-context", "32k", "--long-output", "128", "--short", "3", "--short-rounds", "1",
        "--short-input", "1024", "--short-output", "64",
    )  # fmt: skip
    assert (code, result["verdict"]) == (0, "PASS")  # engine_finished counted the long request on its engine
    assert [p["label"] for p in result["points"]] == ["long alone", "shorts alone", "1x32K+3"]
    summary = result["mixed"]["engine"]
    criteria = summary["criteria"]
    assert criteria["long_alone_latency_s"] > 0
    assert criteria["short_ttft_idle_p99_s"] > 0
    # Alone on its engine, the long request's completion is its time alone: the figures are the engine's own
    # (GET /sim/requests), not the client's reading of its stream, which this shared host delays.
    assert all(p["label"] != "1x32K+3" or p["ok"] for p in result["points"])
    assert 0.97 < criteria["long_completion_vs_alone"] < 1.03
    assert criteria["no_preemption_ok"] is True
    assert summary["long_decode_tok_s"] > 60  # DSpark7, synthetic acceptance, alone: ~70 tok/s
    assert criteria["all_met"] is True
    timeline = summary["timeline"]
    assert len(timeline["shorts"]) == 3
    assert timeline["long"]["first_token_s"] > timeline["long"]["sent_s"]
    assert timeline["long"]["progress"][-1][1] == 1.0
    assert (tmp_path / "mixed" / "timeline.png").stat().st_size > 10_000
