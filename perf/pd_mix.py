"""On-demand benchmark: the seed's mix, aggregated against prefill/decode disaggregated, on the simulator.

Why this exists (issue 29, item 7): P/D pays when one long prefill shares every engine step with the
decodes of 31 short requests (docs/FACTS.md: "no sustained stall from long requests"). Two deployments of
the same two TP8 engines, each behind the real vllm-router 0.1.17, run the same mix in one session
(`aisctl bench mixed-ab`, rounds interleaved):

- aggregated: both engines serve whole requests, the router's cache_aware policy in front;
- disaggregated: one prefill engine (kv_producer) and one decode engine (kv_consumer) with vllm-ascend's
  Mooncake connector settings, the router in `--vllm-pd-disaggregation --kv-connector nixl` mode
  (docs/router.md "P/D contract").

Figures: the short requests' TTFT p50/p99, the long request's TTFT and completion time, output tok/s, as a
table (stdout, result.md) and a plot (comparison.png). They are simulator figures (aissim's Ascend
timings and its KV-transfer bandwidth), not an NPU's: they say what the simulator predicts, and that the
two paths work end to end through the real router. Run:
`.venv/bin/python perf/pd_mix.py [--scale 10] [--long-context 262144] [--rounds 2] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ascend_operator.cli.main import main as aisctl

ROOT = Path(__file__).resolve().parents[1]
MODEL = "deepseek-v4-flash"
SPEC = '{"method":"dspark","num_speculative_tokens":7,"enforce_eager":true}'
#: vllm-ascend v0.25.1rc1's Mooncake connector settings as the operator renders them (render/disaggregation.py).
KV = (
    '{{"kv_connector":"MooncakeConnectorV1","kv_role":"{role}","kv_port":{port},"engine_id":"{engine}",'
    '"kv_connector_extra_config":{{"prefill":{{"dp_size":1,"tp_size":8}},"decode":{{"dp_size":1,"tp_size":8}}}}}}'
)


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def engine_args(host: str, port: int, scale: float, *extra: str) -> list[str]:
    """The seed's TP8 engine (docs/FACTS.md "Launch command") on a loopback address."""
    return [
        "/data/models/DeepSeek-V4-Flash-0731-w8a8", "--host", host, "--port", str(port),
        "--served-model-name", MODEL, "--max-model-len", "327680", "--max-num-batched-tokens", "8192",
        "--max-num-seqs", "32", "--tensor-parallel-size", "8", "--block-size", "128",
        "--speculative-config", SPEC, "--sim-time-scale", str(scale), "--sim-acceptance-profile", "synthetic",
        *extra,
    ]  # fmt: skip


def wait_http(url: str, *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not answering after {timeout:.0f}s")
        time.sleep(0.2)


@contextmanager
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started here, each stopped by its own PID at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start(procs: list[subprocess.Popen[bytes]], argv: list[str], log: Path) -> None:
    env = {**os.environ, "VLLM_HOST_IP": "127.0.0.1"}
    with log.open("wb") as out:
        procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env))


def router_bin() -> str:
    out = subprocess.run(["bash", str(ROOT / "hack" / "vllm-router.sh")], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=10.0, help="engine seconds per wall second")
    parser.add_argument("--long-context", default="256K")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--short-rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    router = router_bin()
    python = sys.executable
    logs = Path(tempfile.mkdtemp(prefix="pd-mix-"))
    hosts = {name: f"127.0.77.{i + 1}" for i, name in enumerate(("agg0", "agg1", "prefill", "decode", "routers"))}
    ports = {name: free_port(host) for name, host in hosts.items()}
    url = {name: f"http://{hosts[name]}:{ports[name]}" for name in ("agg0", "agg1", "prefill", "decode")}
    agg_port, pd_port = free_port(hosts["routers"]), free_port(hosts["routers"])
    with processes() as procs:
        for name in ("agg0", "agg1"):
            start(procs, [python, "-m", "aissim", "serve", *engine_args(hosts[name], ports[name], args.scale)],
                  logs / f"{name}.log")  # fmt: skip
        for name, role in (("prefill", "kv_producer"), ("decode", "kv_consumer")):
            kv = KV.format(role=role, port=free_port(hosts[name]), engine=name)
            start(procs, [python, "-m", "aissim", "serve",
                          *engine_args(hosts[name], ports[name], args.scale, "--kv-transfer-config", kv)],
                  logs / f"{name}.log")  # fmt: skip
        for name in url:
            wait_http(f"{url[name]}/health")
        common = ["--host", hosts["routers"], "--request-timeout-secs", "3600", "--max-concurrent-requests", "256"]
        start(procs, [router, *common, "--port", str(agg_port), "--worker-urls", url["agg0"], url["agg1"],
                      "--policy", "cache_aware", "--prometheus-port", str(free_port(hosts["routers"]))],
              logs / "router-aggregated.log")  # fmt: skip
        start(procs, [router, *common, "--port", str(pd_port), "--vllm-pd-disaggregation",
                      "--prefill", url["prefill"], "--decode", url["decode"], "--kv-connector", "nixl",
                      "--prometheus-port", str(free_port(hosts["routers"]))],
              logs / "router-pd.log")  # fmt: skip
        for port in (agg_port, pd_port):
            wait_http(f"http://{hosts['routers']}:{port}/readiness")
        out = args.out or ROOT / "bench-results" / f"pd-mix-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        code = aisctl([
            "bench", "mixed-ab", "--url-a", f"http://{hosts['routers']}:{agg_port}", "--label-a", "aggregated",
            "--metrics-a", f"{url['agg0']},{url['agg1']}",
            "--url-b", f"http://{hosts['routers']}:{pd_port}", "--label-b", "disaggregated",
            "--metrics-b", url["decode"], "--rounds", str(args.rounds), "--long-context", args.long_context,
            "--short-rounds", str(args.short_rounds), "--seed", str(args.seed), "--out", str(out), "--no-progress",
        ])  # fmt: skip
    result = json.loads((out / "result.json").read_text())
    print(f"\nlogs: {logs}; result: {out}; verdict {result['verdict']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
