"""On-demand benchmark: the seed's mixed workload against the shipped example on the simulator, two layouts
side by side, with the seed's criteria judged against each layout's own baselines (issue 39 items 3-4).

Why this exists: docs/benchmarking.md answers the seed's open question (1 x ~300K beside 31 short requests:
are the short ones starved, does the long one keep 50 tok/s, how much slower is it than alone, KV peak,
preemption) for examples/dsv4-flash.yaml as the operator renders it, before and after a change of its
settings, and for layouts of more than one engine. Every engine here is `aissim serve` with the example's
rendered args (render/args.py, as a pod gets them), with `spec.engine` fields overridden per layout:

- `agg[:field=value,...]`: one engine (the example, aggregated; `field=unset` removes the example's field);
- `split[:...]`: two engines, the short requests sent to the example's and the long request to
  examples/dsv4-flash-long.yaml's (the same engine without `longPrefillTokenThreshold`), the overrides applied
  to both (length-aware routing by the client or a gateway: two services, no router choice involved);
- `pd[:...]`: one prefill and one decode engine behind the real vllm-router 0.1.17 in P/D mode, the
  connector settings perf/pd_mix.py uses (the overrides apply to both engines);
- `pdsplit[:...]`: two prefill engines and one decode engine, two P/D routers sharing the decode engine, the
  long request sent through one, the short ones through the other (length-aware prefill routing); the long
  request's prefill engine has examples/dsv4-flash-long.yaml's args, the other two the example's.

Then `aisctl bench mixed-ab --baseline` runs both layouts in one session, rounds interleaved, and writes
result.json / result.md / comparison.png / timeline.png. Figures are the simulator's engine seconds.
Run from the repository root: `nice -n 5 .venv/bin/python -m perf.mixed_sim --a agg
--b agg:longPrefillTokenThreshold=512 [--scale 10] [--rounds 2] [--acceptance real] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ascend_operator.api.parse import parse_resource
from ascend_operator.cli.main import main as aisctl
from ascend_operator.render.args import build_engine_args
from perf.pd_mix import KV, free_port, processes, router_bin, start, wait_http

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dsv4-flash.yaml"
#: The service for long prompts only (docs/benchmarking.md "The seed's open question"): the engine of `split`'s
#: and `pdsplit`'s long request.
EXAMPLE_LONG = ROOT / "examples" / "dsv4-flash-long.yaml"


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "unset": None}.get(text, text)


def layout(text: str) -> tuple[str, dict[str, Any]]:
    kind, _, rest = text.partition(":")
    if kind not in ("agg", "split", "pd", "pdsplit"):
        raise argparse.ArgumentTypeError(f"layout {kind!r}: expected agg, split, pd or pdsplit")
    fields = dict(item.split("=", 1) for item in rest.split(",") if item)
    return kind, {k: _value(v) for k, v in fields.items()}


def engine_argv(
    fields: dict[str, Any], *, scale: float, acceptance: str, extra: list[str], example: Path = EXAMPLE
) -> list[str]:
    """`aissim serve` with an example's rendered args and these spec.engine fields."""
    body = yaml.safe_load(example.read_text())
    engine = body["spec"]["engine"]
    engine.update(fields)
    for key in [k for k, v in fields.items() if v is None]:  # `field=unset`: as if the example had none
        del engine[key]
    args = build_engine_args(parse_resource(body).spec)
    return [
        sys.executable, "-m", "aissim", *args, "--sim-time-scale", str(scale),
        "--sim-acceptance-profile", acceptance, *extra,
    ]  # fmt: skip


class Stack:
    """The processes of both layouts, their addresses, and what mixed-ab needs of each side."""

    def __init__(self, procs: list[Any], logs: Path, scale: float, acceptance: str, subnet: int) -> None:
        self.procs, self.logs, self.scale, self.acceptance = procs, logs, scale, acceptance
        self.subnet = subnet
        self.hosts = 0
        self.routers: list[str] = []

    def _engine(self, name: str, fields: dict[str, Any], extra: Sequence[str] = (), example: Path = EXAMPLE) -> str:
        self.hosts += 1
        host = f"127.0.{self.subnet}.{self.hosts}"
        port = free_port(host)
        env = {"AIS_SIM_BIND_HOST": host, "AIS_SIM_BIND_PORT": str(port)}
        os.environ.update(env)  # start() copies os.environ into the child
        argv = engine_argv(fields, scale=self.scale, acceptance=self.acceptance, extra=list(extra), example=example)
        print(f"{name}: {' '.join(argv[3:])}", file=sys.stderr)  # what each engine ran with, for the write-up
        start(self.procs, argv, self.logs / f"{name}.log")
        url = f"http://{host}:{port}"
        wait_http(f"{url}/health", timeout=120)
        return url

    def _pd(self, name: str, prefill: str, decode: str) -> str:
        host = f"127.0.{self.subnet}.200"
        port = free_port(host)
        common = ["--host", host, "--request-timeout-secs", "3600", "--max-concurrent-requests", "256"]
        start(self.procs, [router_bin(), *common, "--port", str(port), "--vllm-pd-disaggregation",
                           "--prefill", prefill, "--decode", decode, "--kv-connector", "nixl",
                           "--prometheus-port", str(free_port(host))], self.logs / f"{name}-router.log")  # fmt: skip
        url = f"http://{host}:{port}"
        wait_http(f"{url}/readiness", timeout=120)
        return url

    def _kv(self, role: str, name: str) -> list[str]:
        return ["--kv-transfer-config", KV.format(role=role, port=free_port("127.0.0.1"), engine=name)]

    def side(self, label: str, kind: str, fields: dict[str, Any]) -> dict[str, str]:
        """Start one layout; returns its mixed-ab URLs: url, long_url (or ""), metrics (comma-separated)."""
        if kind == "agg":
            url = self._engine(label, fields)
            return {"url": url, "long_url": "", "metrics": url}
        if kind == "split":
            url = self._engine(f"{label}-short", fields)
            long_url = self._engine(f"{label}-long", fields, example=EXAMPLE_LONG)
            return {"url": url, "long_url": long_url, "metrics": ""}  # the bench scrapes both engines
        decode = self._engine(f"{label}-decode", fields, self._kv("kv_consumer", f"{label}-decode"))
        prefill = self._engine(f"{label}-prefill", fields, self._kv("kv_producer", f"{label}-prefill"))
        url = self._pd(label, prefill, decode)
        if kind == "pd":
            return {"url": url, "long_url": "", "metrics": decode}
        kv_long = self._kv("kv_producer", f"{label}-prefill-long")
        prefill_long = self._engine(f"{label}-prefill-long", fields, kv_long, example=EXAMPLE_LONG)
        # A second router on another loopback address: the long request's prefill engine, the same decode engine.
        self.subnet, saved = self.subnet + 1, self.subnet
        long_url = self._pd(f"{label}-long", prefill_long, decode)
        self.subnet = saved
        # The decode engine counts every request (prompt tokens as external_kv_transfer, every output token).
        return {"url": url, "long_url": long_url, "metrics": decode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=layout, default=("agg", {}), help="layout A (default: the example as shipped)")
    parser.add_argument("--b", type=layout, required=True, help="layout B")
    parser.add_argument("--label-a", default="A")
    parser.add_argument("--label-b", default="B")
    parser.add_argument("--scale", type=float, default=10.0, help="engine seconds per wall second")
    parser.add_argument("--acceptance", choices=("real", "synthetic"), default="real")
    parser.add_argument("--long-context", default="300K")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logs = Path(tempfile.mkdtemp(prefix="mixed-sim-"))
    with processes() as procs:
        stack = Stack(procs, logs, args.scale, args.acceptance, subnet=139)
        sides = {"a": stack.side(args.label_a, *args.a), "b": stack.side(args.label_b, *args.b)}
        out = args.out or ROOT / "bench-results" / f"mixed-sim-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        cmd = ["bench", "mixed-ab", "--baseline", "--rounds", str(args.rounds), "--long-context", args.long_context,
               "--seed", str(args.seed), "--out", str(out), "--no-progress", "--timeout", "7200"]  # fmt: skip
        for key, label in (("a", args.label_a), ("b", args.label_b)):
            s = sides[key]
            cmd += [f"--url-{key}", s["url"], f"--label-{key}", label]
            if s["metrics"]:
                cmd += [f"--metrics-{key}", s["metrics"]]
            if s["long_url"]:
                cmd += [f"--long-url-{key}", s["long_url"]]
        print("aisctl " + " ".join(cmd), file=sys.stderr)
        code = aisctl(cmd)
    result = json.loads((out / "result.json").read_text())
    print(f"\nlogs: {logs}; result: {out}; verdict {result['verdict']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
