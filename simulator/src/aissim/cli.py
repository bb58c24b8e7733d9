"""The `aissim` command: `aissim serve <vllm serve args...>` and `aissim attach`, parsed here and handed over.

Why this module exists: the simulator is the engine for tests, the local demo and users without NPUs, and
it must start from a rendered pod's args unchanged. `serve` runs one engine (runtime.py); `attach` gives
every engine pod of a cluster one, through one of two supervisors: a process per engine (attach.py) or all
engines in this process (`--shared`, shared.py). This module is the top of the simulator's layers
(.importlinter): it imports them, nothing imports it.

Env overrides for harnesses: AIS_SIM_TIME_SCALE, AIS_SIM_ACCEPTANCE_PROFILE, AIS_SIM_FAULTS (`;`-separated
fault flags), AIS_SIM_LOAD_SECONDS, AIS_SIM_DROP_ARGS, AIS_SIM_SEED (each used when its --sim-* flag is
absent), and AIS_SIM_BIND_HOST / AIS_SIM_BIND_PORT, which override --host/--port so an unchanged
production command (`--host 0.0.0.0 --port 8000`) can be started on a loopback address of the harness's
choice.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from aissim.args import VLLM_SERVE_USAGE, ArgsError, UnrecognizedArguments, UnsupportedFeature, parse_serve_args
from aissim.faults import FaultError, parse_fault_flag
from aissim.runtime import apply_bind_env, serve

USAGE = """usage: aissim serve MODEL [vllm serve flags...] [--sim-* flags]

Simulator flags (env var used when the flag is absent):
  --sim-time-scale F            engine seconds per wall second (AIS_SIM_TIME_SCALE, default 1)
  --sim-acceptance-profile P    real | synthetic DSpark acceptance (AIS_SIM_ACCEPTANCE_PROFILE, default real)
  --sim-fault SPEC              start with a fault, repeatable: stall-at-kv:threshold=0.975, hang,
                                drift:fraction=0.18,period_s=600, crash:exit_code=3,after_s=60
                                (AIS_SIM_FAULTS)
  --sim-load-seconds N          model load time in engine seconds; port bound, silent
                                (AIS_SIM_LOAD_SECONDS)
  --sim-drop-args F[,F]         ignore these vLLM flags as if never given (AIS_SIM_DROP_ARGS)
  --sim-seed N                  acceptance sequence seed (AIS_SIM_SEED)
  --sim-model-type T            config.json model_type for vllm-ascend's block-size rewrite
                                (AIS_SIM_MODEL_TYPE, default deepseek_v4)
  --sim-dense                   the model has no MoE layers: DP ranks run independently, so a lost
                                peer of a group stops only its own ranks (AIS_SIM_DENSE=1)
"""


ATTACH_DESCRIPTION = """Give every engine pod of a (KWOK) cluster an engine, as a kubelet would a container: a simulator
(or, with --engine vllm, the real engine) bound to the pod's IP and engine port, started with the pod's own
rendered args, stopped when the pod goes, restarted after a back-off when it exits. Router pods (spec.router)
get the real vllm-router the same way (aissim/routers.py)."""


def attach(argv: list[str]) -> int:
    """`aissim attach [--shared]`: pick the supervisor and run it until interrupted."""
    parser = argparse.ArgumentParser(prog="aissim attach", description=ATTACH_DESCRIPTION)
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig (default: KUBECONFIG or ~/.kube/config)")
    parser.add_argument("-n", "--namespace", default=None, help="only pods of this namespace")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between pod listings")
    parser.add_argument("--log-dir", default=None, help="write each simulator's output to a file here")
    parser.add_argument(
        "--shared", action="store_true",
        help="run every pod's engine inside this one process (aissim/shared.py), for scale runs; "
        "engine logs go to this process's output, each line naming its pod",
    )  # fmt: skip
    parser.add_argument(
        "--engine", choices=("sim", "vllm"), default="sim",
        help="sim: the simulator (default); vllm: the real engine, vLLM 0.25.1 on CPU with a tiny model, the "
        "pod's args translated by aissim/realengine.py (docs/real-engine.md)",
    )  # fmt: skip
    parser.add_argument(
        "--vllm-python", default=None,
        help="the Python of the real engine's install, as hack/real-vllm.sh prints it (default: $AIS_VLLM_PYTHON)",
    )  # fmt: skip
    parser.add_argument(
        "--model-cache", default=None,
        help="the folder the tiny model is made in (default: ${XDG_CACHE_HOME:-~/.cache}/ascend-operator/models)",
    )  # fmt: skip
    parser.add_argument(
        "--router-bin", default=None,
        help="the vllm-router 0.1.17 binary for router pods (spec.router), as hack/vllm-router.sh prints it "
        "(default: $AIS_VLLM_ROUTER, else that script's cached install); not with --shared",
    )  # fmt: skip
    parser.add_argument(
        "--exit-grace", type=float, default=None,
        help="seconds the engines get when this command itself stops (default: the kubelet-like grace a deleted "
        "pod's engine gets, 15 s); a test harness tearing down gives less, since no client waits any more",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.shared and args.engine != "sim":
        parser.error("--shared runs simulators only")
    if not args.shared:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        # imported on use: only attach needs the kubernetes client
        from aissim import attach as processes
        from aissim import routers

        log_dir = Path(args.log_dir) if args.log_dir else None
        return processes.run(
            args, (routers.Routers(routers.find_binary(args.router_bin, os.environ), log_dir=log_dir),)
        )
    from aissim import shared

    handler = logging.StreamHandler()
    handler.addFilter(shared.PodLogFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(pod)s]: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    return asyncio.run(shared.run(args))


def main(argv: list[str]) -> int:
    """Entry point for `aissim serve ...` and `aissim attach ...` (argv after the program name)."""
    if argv[:1] == ["attach"]:
        return attach(argv[1:])
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, file=sys.stdout)
        return 0 if argv else 2
    if argv[0] != "serve":
        print(f"aissim: unknown command {argv[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(USAGE, file=sys.stdout)
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(asctime)s [sim] %(message)s")
    try:
        cfg = apply_bind_env(parse_serve_args(argv[1:]))
        for spec in cfg.sim.faults:
            parse_fault_flag(spec)
    except UnrecognizedArguments as err:  # as vLLM's argparse: usage line, error line, exit 2
        print(f"{VLLM_SERVE_USAGE}\n{err}", file=sys.stderr)
        return 2
    except UnsupportedFeature as err:  # as vLLM: the API server dies on NotImplementedError, exit 1
        print(f"NotImplementedError: {err}", file=sys.stderr)
        return 1
    except (ArgsError, FaultError) as err:
        print(f"aissim serve: {err}", file=sys.stderr)
        return 2
    return asyncio.run(serve(cfg))


def console() -> None:
    """The `aissim` console script."""
    sys.exit(main(sys.argv[1:]))
