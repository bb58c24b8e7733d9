"""`aisctl bench` against the real engine, held to vLLM's own client on the same engine in the same run.

Why: the bench's verdict rules (fresh prompts, fixed output, the engine's own counts) were written against
the simulator. Here they must PASS on vLLM 0.25.1, and the figures must agree with `vllm bench serve` (the
same install's client, vllm/benchmarks/serve.py, run as `vllm bench serve` runs it) measuring the same
engine with the same shape of load: a bench that measured its own overhead (or a kinder engine) would not.
The two clients run in back-to-back pairs, five of them, and the median of the pairs' ratios is compared
(the machine is shared and noisy: load that moves between runs moves both halves of a pair together).

The target (issue 27) is agreement within 10%. It is a benchmark figure, printed as met or NOT met with the
load average beside it, not asserted: both clients share 2 cores with the engine's three processes, and under
load the two clients' own CPU cost is part of what they measure. On the quiet machine the median paired ratio
read 1.065 (2026-12-05); in CI runs beside lane B, with load averages near 20, medians of 0.87-0.96 (CI7),
1.34 and 1.50 (pairs 1.29, 2.02, 1.50, 1.01, 1.80: `vllm bench serve`'s heavier client lost more to the
contention). What the test asserts is what no load explains:
- both clients complete every request and the bench's verdict is PASS (its checks hold the engine's own counts
  to the client's: requests finished, fixed output lengths, fresh prompts);
- the bench times nothing but its requests: a closed loop of C clients lasts about the sum of its requests'
  latencies over C (Little's law), so each run's wall time over that must stay within 1.3 (a run that timed
  its own setup, connections or tokenizer, reads far above; load moves both sides of the ratio together);
- the medians agree within 2x (a bench that counted chunks for tokens, or seconds for milliseconds, is off by
  far more), which no CI run came near.
Run it on demand, on a quiet machine, for the figure:
`pytest tests/real/test_bench_real.py -s`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

from ascend_operator.cli.main import main
from tests.real.engines import Engine, start_engine, wait_healthy

MODEL = "deepseek-v4-flash"
CONCURRENCY, INPUT, OUTPUT, REQUESTS = 4, 256, 128, 32
#: Runs per client. Pairs, not two sets of runs: CI7 (helpers loading the machine) read medians of 3 at
#: 0.726 while its back-to-back pairs read 0.87, 0.67 and 0.95: the load moved between the sets. Five: three
#: were tried to save ~70 s of CI and failed the 25% bound on a loaded cold run (2026-12-05, pairs 1.34, 0.93,
#: 1.64: median 1.34), noise that five pairs ride out. `AIS_BENCH_PAIRS` sets another count on demand.
PAIRS = int(os.environ.get("AIS_BENCH_PAIRS", "5"))
#: `vllm bench serve`: what vllm/entrypoints/cli/benchmark/serve.py does, without the CLI wrapper whose
#: --version needs a distribution named `vllm` (aissim/realengine.py explains).
VLLM_BENCH = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def aisctl_run(engine: Engine, out: Path, seed: int) -> dict[str, float]:
    code = main(
        [
            "bench", "sweep", "--url", engine.base, "--concurrency", str(CONCURRENCY),
            "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT), "--rounds", str(REQUESTS // CONCURRENCY),
            "--seed", str(seed), "--out", str(out), "--no-progress",
        ]
    )  # fmt: skip
    result = json.loads((out / "result.json").read_text())
    assert (code, result["verdict"]) == (0, "PASS"), result
    point = result["points"][0]
    assert point["succeeded"] == REQUESTS
    closed_loop = point["client"]["latency_mean_s"] * REQUESTS / CONCURRENCY
    wall = point["wall_s"]
    return {"req_s": point["succeeded"] / wall, "tok_s": point["output_tok_s"], "wall/loop": wall / closed_loop}


def vllm_run(python: str, engine: Engine, model_dir: Path, out: Path, seed: int) -> dict[str, float]:
    subprocess.run(
        [
            python, "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", engine.base, "--endpoint", "/v1/completions",
            "--model", str(model_dir), "--served-model-name", MODEL, "--tokenizer", str(model_dir),
            "--dataset-name", "random", "--random-input-len", str(INPUT), "--random-output-len", str(OUTPUT),
            "--num-prompts", str(REQUESTS), "--max-concurrency", str(CONCURRENCY), "--ignore-eos",
            "--seed", str(seed), "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm", "--save-result",
            "--result-dir", str(out.parent),
            "--result-filename", out.name,
        ],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result["completed"] == REQUESTS, result
    closed_loop = result["mean_e2el_ms"] / 1000 * REQUESTS / CONCURRENCY
    return {
        "req_s": result["request_throughput"], "tok_s": result["output_throughput"],
        "wall/loop": result["duration"] / closed_loop,
    }  # fmt: skip


def test_aisctl_bench_passes_on_vllm_and_agrees_with_vllm_bench_serve(
    real_vllm: str, real_engine_factory: list[Engine], tmp_path: Path
) -> None:
    serve = ["serve", "/models/m", "--served-model-name", MODEL, "--max-model-len", "32768"]
    serve += ["--max-num-seqs", "8", "--max-num-batched-tokens", "2048"]
    cache = tmp_path / "models"
    engine = start_engine(real_vllm, serve, host="127.0.0.61", port=8000, log=tmp_path / "engine.log", cache=cache)
    real_engine_factory.append(engine)
    print(f"\n[real] bench engine healthy after {wait_healthy(engine):.1f}s")
    model_dir = next(cache.iterdir())
    aisctl_run(engine, tmp_path / "warm", seed=99)  # the engine's first requests are slower (lazy init)
    ours, theirs = [], []
    load0 = os.getloadavg()[0]
    for i in range(PAIRS):  # side by side: each pair back to back, who goes first alternating (drift cancels)
        if i % 2:
            theirs.append(vllm_run(real_vllm, engine, model_dir, tmp_path / f"vllm-{i}.json", seed=i))
        ours.append(aisctl_run(engine, tmp_path / f"aisctl-{i}", seed=i))
        if not i % 2:
            theirs.append(vllm_run(real_vllm, engine, model_dir, tmp_path / f"vllm-{i}.json", seed=i))
    figures = {}
    for key in ("req_s", "tok_s"):
        a, b = statistics.median(r[key] for r in ours), statistics.median(r[key] for r in theirs)
        paired = statistics.median(x[key] / y[key] for x, y in zip(ours, theirs, strict=True))
        figures[key] = (round(a, 2), round(b, 2), round(paired, 3))
    load = f"load average {load0:.1f} before the pairs, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores"
    print(f"[real] aisctl vs vllm bench serve, medians of {PAIRS} (aisctl, vllm, median paired ratio): {figures}")
    print(f"[real] runs: aisctl {ours}; vllm {theirs}")
    met = all(0.9 <= ratio <= 1.1 for _, _, ratio in figures.values())
    print(f"[real] the 10% agreement target: {'met' if met else 'NOT met'} ({load})")
    for run in ours:
        assert run["wall/loop"] <= 1.3, f"aisctl bench timed more than its requests (Little's law): {ours}"
    for key, (_, _, ratio) in figures.items():
        assert 0.5 <= ratio <= 2.0, f"{key}: aisctl bench and vllm bench serve disagree by over 2x: {figures}"
