"""`aisctl bench` against the real engine, held to vLLM's own client on the same engine in the same run.

Why: the bench's verdict rules (fresh prompts, fixed output, the engine's own counts) were written against
the simulator. Here they must PASS on vLLM 0.25.1, and the figures must agree with `vllm bench serve` (the
same install's client, vllm/benchmarks/serve.py, run as `vllm bench serve` runs it) measuring the same
engine with the same shape of load: a bench that measured its own overhead (or a kinder engine) would not.
The two clients run in back-to-back pairs, five of them, and the median of the pairs' ratios is compared
(the machine is shared and noisy: load that moves between runs moves both halves of a pair together).

The target (issue 27) is agreement within 10%. It is a benchmark figure, printed as met or NOT met, not
asserted: on 2 cores shared by the engine's three processes, the client and whatever else the machine runs,
single runs spread by +-15% and the medians of 3 read 0.957, 0.902 and 0.869 in three CI runs of the same code.
What the test asserts is what no noise explains: both clients complete every request, the bench's verdict is
PASS, and the medians agree within 25% (a bench that counted tokens or requests wrongly, or timed its own
setup, is off by far more). Run it on demand for the figure:
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
    return {"req_s": point["succeeded"] / point["wall_s"], "tok_s": point["output_tok_s"]}


def vllm_run(python: str, engine: Engine, model_dir: Path, out: Path, seed: int) -> dict[str, float]:
    subprocess.run(
        [
            python, "-c", VLLM_BENCH, "--backend", "vllm", "--base-url", engine.base, "--endpoint", "/v1/completions",
            "--model", str(model_dir), "--served-model-name", MODEL, "--tokenizer", str(model_dir),
            "--dataset-name", "random", "--random-input-len", str(INPUT), "--random-output-len", str(OUTPUT),
            "--num-prompts", str(REQUESTS), "--max-concurrency", str(CONCURRENCY), "--ignore-eos",
            "--seed", str(seed), "--disable-tqdm", "--save-result", "--result-dir", str(out.parent),
            "--result-filename", out.name,
        ],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result["completed"] == REQUESTS, result
    return {"req_s": result["request_throughput"], "tok_s": result["output_throughput"]}


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
    print(f"[real] aisctl vs vllm bench serve, medians of {PAIRS} (aisctl, vllm, median paired ratio): {figures}")
    print(f"[real] runs: aisctl {ours}; vllm {theirs}")
    met = all(0.9 <= ratio <= 1.1 for _, _, ratio in figures.values())
    print(f"[real] the 10% agreement target: {'met' if met else 'NOT met'}")
    for key, (_, _, ratio) in figures.items():
        assert 0.75 <= ratio <= 1.33, f"{key}: aisctl bench and vllm bench serve disagree by over 25%: {figures}"
