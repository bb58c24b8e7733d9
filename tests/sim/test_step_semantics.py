"""The simulator's counters move when vLLM 0.25.1's move (contract.vllm_metrics), not when a kinder engine's would.

Started with the exact rendered args of examples/dsv4-flash.yaml: during a lone 256K chunked prefill no step
returns an output, so vLLM builds no IterationStats (vllm/v1/engine/async_llm.py:663) and neither the
iteration histogram nor the prompt-token counter moves; only the KV gauge rises, chunk by chunk. When the
prefill completes, the first token is output and both jump.
"""

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp

from aissim.args import parse_serve_args
from aissim.runtime import apply_bind_env, launch
from ascend_operator.api.parse import parse_resource
from ascend_operator.render.args import build_engine_args
from harness.loadgen import complete, scrape_totals
from tests.sim.conftest import loopback

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dsv4-flash.yaml"
PROMPT = 256 * 1024
SCALE = 20.0  # the seed's 54.82 s prefill in ~2.7 s


def _example_args() -> list[str]:
    import yaml

    args = build_engine_args(parse_resource(yaml.safe_load(EXAMPLE.read_text())).spec)
    assert args[0] == "serve"
    return args[1:]


async def test_lone_prefill_moves_only_kv_then_counters_jump() -> None:
    argv = [*_example_args(), "--sim-time-scale", str(SCALE)]
    cfg = apply_bind_env(parse_serve_args(argv, env={}), {"AIS_SIM_BIND_HOST": loopback(), "AIS_SIM_BIND_PORT": "0"})
    running = await launch(cfg, exit_fn=lambda code: None)
    assert not isinstance(running, str), running
    base = f"http://{running.host}:{running.port}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:

            async def totals() -> dict[str, float]:
                async with session.get(base + "/metrics") as resp:
                    return scrape_totals(await resp.text())

            before = await totals()
            request = asyncio.create_task(
                complete(session, base, model="deepseek-v4-flash", prompt_tokens=PROMPT, max_tokens=1)
            )
            during: list[dict[str, float]] = []
            while not request.done():
                await asyncio.sleep(0.25)
                if not request.done():
                    during.append(await totals())
            await request
            after = await totals()
    finally:
        await running.close()
    mid = [t for t in during if t["vllm:num_requests_running"] == 1]
    assert len(mid) >= 4, f"only {len(mid)} scrapes during the prefill"
    for t in mid:
        assert t["vllm:iteration_tokens_total_count"] == before["vllm:iteration_tokens_total_count"]
        assert t["vllm:prompt_tokens_total"] == before["vllm:prompt_tokens_total"]
        assert t["vllm:generation_tokens_total"] == before["vllm:generation_tokens_total"]
    kv = [t["vllm:kv_cache_usage_perc"] for t in mid]
    assert kv == sorted(kv)
    assert kv[-1] > kv[0] > 0, kv
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == PROMPT
    assert after["vllm:iteration_tokens_total_count"] > before["vllm:iteration_tokens_total_count"]
    # The one step with an output observes the whole prompt's computed tokens plus the token
    # (PrefillStats.num_computed_tokens, vllm/v1/metrics/stats.py:267-270; loggers.py:1168-1171).
    assert after["vllm:iteration_tokens_total_count"] - before["vllm:iteration_tokens_total_count"] == 1
    assert after["vllm:iteration_tokens_total_sum"] - before["vllm:iteration_tokens_total_sum"] == PROMPT + 1


def test_serve_refuses_an_unknown_flag_like_vllm() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aissim", "serve", *_example_args(), "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-2:] == [
        "usage: vllm serve [model_tag] [options]",
        "vllm serve: error: unrecognized arguments: --no-such-flag",
    ]
