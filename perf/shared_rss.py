"""`python -m perf.shared_rss --engines 10,50,200`: memory of one shared simulator process per idle engine.

Why: `aissim attach --shared` exists so a 200-service scale run fits on a 2-core machine; what it costs
per engine decides whether it does. For each count a fresh child process starts that many engines through
the same EngineHost `attach --shared` uses, each with the production pod's args (examples/dsv4-flash.yaml
rendered by the operator's renderer) on its own 127.x address, waits until every engine answers /health
and a canary-sized completion, and reports its VmRSS; the parent prints one line per count and the
marginal MB per engine. No cluster is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from aissim.pods import Target, target_of
from aissim.shared import EngineHost
from harness.procs import rss_bytes
from perf.scale_io import direct_pod

NET = 251  # 127.251.<i // 250>.<i % 250 + 1>: no local cluster claims pod net 251 (hack/local-cluster: 1..200)


def targets(count: int) -> list[Target]:
    """`count` engine pods of the example, each on its own loopback address."""
    out: list[Target] = []
    for i in range(count):
        pod = direct_pod(f"svc-{i:03d}", "scale")
        pod["metadata"]["uid"] = f"uid-{i:05d}"
        pod["status"] = {"phase": "Running", "podIP": f"127.{NET}.{i // 250}.{i % 250 + 1}"}
        target = target_of(pod)
        if target is None:
            raise RuntimeError("the rendered pod gives no simulator target")
        out.append(target)
    return out


def own_rss() -> int:
    return rss_bytes(Path("/proc/self/status").read_text())


async def measure(count: int) -> dict[str, float]:
    """Start `count` engines in this process; RSS once all answered."""
    host = EngineHost(env={"AIS_SIM_TIME_SCALE": "30"})
    rss0 = own_rss()
    started = time.monotonic()
    await host.sync(targets(count), now=time.monotonic())
    body = {"model": "deepseek-v4-flash", "prompt": "Reply with OK.", "max_tokens": 4}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        for target in host.targets():
            base = f"http://{target.ip}:{target.port}"
            for _ in range(200):
                try:
                    async with session.get(base + "/health") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            async with session.post(base + "/v1/completions", json=body) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"{base}: completion answered {resp.status}")
    rss = own_rss()
    await host.close()
    return {"engines": count, "rss_mb": rss / 1e6, "before_mb": rss0 / 1e6, "start_s": time.monotonic() - started}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perf.shared_rss", description=__doc__.split("\n\n")[0])
    p.add_argument("--engines", default="10,50,200", help="engine counts, comma-separated")
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # the child's own count
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.one is not None:
        print(json.dumps(asyncio.run(measure(args.one))))
        return 0
    rows = []
    for count in (int(c) for c in args.engines.split(",")):
        child = subprocess.run(
            [sys.executable, "-m", "perf.shared_rss", "--one", str(count)], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    print("| engines | RSS of the shared process (MB) | per engine above the empty process (MB) | start (s) |")
    print("|---|---|---|---|")
    for r in rows:
        per = (r["rss_mb"] - r["before_mb"]) / r["engines"]
        print(f"| {r['engines']} | {r['rss_mb']:.0f} | {per:.2f} | {r['start_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
