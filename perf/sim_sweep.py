"""On-demand calibration sweep: the engine simulator's figures next to the seed's (docs/FACTS.md).

Why this exists: the simulator is only worth testing against if its throughput, TPOT and prefill times sit
on the seed's tables. This runs, against a fresh in-process simulator each time:
  1. the TP8 concurrency sweep C1/C8/C16/C32/C64 (256 in / 512 out, ignore_eos, DSpark7, synthetic
     acceptance) -> output tok/s and mean TPOT vs docs/FACTS.md "TP8 concurrency sweep";
  2. the clean C1 prefill table 8K..512K (TP8) and 8K..256K (DP2 x TP4) -> engine TTFT;
  3. DP2 x TP4 at C64 -> output tok/s vs docs/FACTS.md "mean 820.04 tok/s".
Target: every figure within 10% of the seed's. Run: `.venv/bin/python perf/sim_sweep.py [--scale 200]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import aiohttp

from aissim import calibration as cal
from aissim.args import parse_serve_args
from aissim.runtime import Running, launch
from harness.loadgen import complete, run_point, scrape_totals

SPEC = '{"method":"dspark","num_speculative_tokens":7,"enforce_eager":true}'


def serve_args(*, tp: int, dp: int, scale: float, max_model_len: int = 327680) -> list[str]:
    return [
        "/data/models/DeepSeek-V4-Flash-0731-w8a8",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--served-model-name",
        "deepseek-v4-flash",
        "--max-model-len",
        str(max_model_len),
        "--max-num-batched-tokens",
        "8192",
        "--max-num-seqs",
        "32",
        "--tensor-parallel-size",
        str(tp),
        "--data-parallel-size",
        str(dp),
        "--block-size",
        "128",
        "--speculative-config",
        SPEC,
        "--sim-time-scale",
        str(scale),
        "--sim-acceptance-profile",
        "synthetic",
    ]


async def start(argv: list[str]) -> Running:
    started = await launch(parse_serve_args(argv, env={}))
    if isinstance(started, str):
        raise RuntimeError(started)
    return started


def pct(got: float, want: float) -> str:
    return f"{100 * (got - want) / want:+.1f}%"


async def sweep(scale: float) -> list[float]:
    errors: list[float] = []
    print(f"TP8 concurrency sweep ({cal.SWEEP_PROMPT_TOKENS} in / {cal.SWEEP_OUTPUT_TOKENS} out), seed vs sim")
    print(f"{'conc':>5} {'seed tok/s':>11} {'sim tok/s':>10} {'err':>7} {'seed TPOT':>10} {'sim TPOT':>9} {'err':>7}")
    for conc, (tok_s, tpot) in cal.TP8_SWEEP.items():
        sim = await start(serve_args(tp=8, dp=1, scale=scale))
        try:
            base = f"http://{sim.host}:{sim.port}"
            point = await run_point(
                base,
                model="deepseek-v4-flash",
                concurrency=conc,
                requests_per_worker=2,
                prompt_tokens=cal.SWEEP_PROMPT_TOKENS,
                output_tokens=cal.SWEEP_OUTPUT_TOKENS,
            )
        finally:
            await sim.close()
        errors += [abs(point.output_tok_s - tok_s) / tok_s, abs(point.mean_tpot_s - tpot) / tpot]
        print(
            f"{conc:>5} {tok_s:>11.1f} {point.output_tok_s:>10.1f} {pct(point.output_tok_s, tok_s):>7} "
            f"{tpot * 1000:>8.1f}ms {point.mean_tpot_s * 1000:>7.1f}ms {pct(point.mean_tpot_s, tpot):>7}"
            f"   (TTFT {point.mean_ttft_s:.2f} s, engine {point.engine_seconds:.0f} s in "
            f"{point.wall_seconds:.2f} s wall)"
        )
    return errors


async def prefill(scale: float) -> list[float]:
    errors: list[float] = []
    print("\nClean C1 prefill (engine TTFT), seed vs sim")
    for tp, dp, table in ((8, 1, cal.TP8_PREFILL_S), (4, 2, cal.TP4_PREFILL_S)):
        sim = await start(serve_args(tp=tp, dp=dp, scale=scale * 5, max_model_len=600_000))
        try:
            base = f"http://{sim.host}:{sim.port}"
            async with aiohttp.ClientSession() as session:
                for context, seed_s in table:
                    async with session.get(base + "/metrics") as r:
                        before = scrape_totals(await r.text())
                    await complete(session, base, model="deepseek-v4-flash", prompt_tokens=context, max_tokens=1)
                    async with session.get(base + "/metrics") as r:
                        after = scrape_totals(await r.text())
                    key = "vllm:time_to_first_token_seconds_sum"
                    ttft = after[key] - before[key]
                    errors.append(abs(ttft - seed_s) / seed_s)
                    label = "TP8" if tp == 8 else "DP2xTP4"
                    print(
                        f"  {label:>8} {context // 1024:>4}K seed {seed_s:>7.2f} s  "
                        f"sim {ttft:>7.2f} s  {pct(ttft, seed_s)}"
                    )
        finally:
            await sim.close()
    return errors


async def dp2_c64(scale: float) -> list[float]:
    sim = await start(serve_args(tp=4, dp=2, scale=scale))
    try:
        point = await run_point(
            f"http://{sim.host}:{sim.port}",
            model="deepseek-v4-flash",
            concurrency=64,
            requests_per_worker=2,
            prompt_tokens=cal.SWEEP_PROMPT_TOKENS,
            output_tokens=cal.SWEEP_OUTPUT_TOKENS,
        )
    finally:
        await sim.close()
    want = cal.DP2_TP4_C64_TOKS
    print(
        f"\nDP2 x TP4 C64: seed {want:.1f} tok/s  sim {point.output_tok_s:.1f} tok/s  {pct(point.output_tok_s, want)}"
    )
    return [abs(point.output_tok_s - want) / want]


async def main_async(scale: float) -> int:
    t0 = time.monotonic()
    errors = await sweep(scale) + await prefill(scale) + await dp2_c64(scale)
    worst = max(errors)
    print(f"\nworst error {100 * worst:.1f}% (target <= 10%), wall {time.monotonic() - t0:.1f} s")
    return 0 if worst <= 0.10 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=200.0, help="engine seconds per wall second")
    args = parser.parse_args()
    return asyncio.run(main_async(args.scale))


if __name__ == "__main__":
    sys.exit(main())
