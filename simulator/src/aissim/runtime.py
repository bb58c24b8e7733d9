"""One simulated engine's runtime: bind, load, check the KV budget, serve, and stop, as `vllm serve` does.

Start-up follows vLLM's order: the listening socket is bound first (vLLM's api_server binds before building
the engine, so probes connect but get no answer while weights load - the realistic `slow-start`), then the
model "loads" for `--sim-load-seconds` engine seconds, then the KV budget is checked (vLLM refuses to start
when max_model_len and max_num_batched_tokens do not fit: docs/FACTS.md "Startup requirement"), then the
HTTP routes come up. `aissim serve` (cli.py) runs one engine with it per process; `aissim attach --shared`
(shared.py) runs one per pod inside one process: the same start-up and faults either way. Its own module so
that neither the command line nor the supervisors import each other for it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass, field, replace

from aiohttp import web

from aissim import calibration as cal
from aissim import kvtransfer
from aissim.args import ArgsError, SimConfig
from aissim.engine import SimEngine
from aissim.faults import FaultError, parse_fault_flag, parse_fault_json
from aissim.group import LeaderLink, run_worker, worker_app, worker_ranks
from aissim.server import ExitFn, build_app, schedule_crash

log = logging.getLogger("aissim")


@dataclass
class Running:
    """A started simulator: where it listens and what to stop."""

    host: str
    port: int
    engine: SimEngine
    runner: web.AppRunner
    links: list[asyncio.Task[None] | LeaderLink] = field(default_factory=list)
    side: web.AppRunner | None = None
    """A prefill engine's KV side channel (aissim/kvtransfer.py), on kv_port."""

    async def close(self) -> None:
        await self.runner.cleanup()
        if self.side is not None:
            await self.side.cleanup()
        for link in self.links:
            if isinstance(link, LeaderLink):
                await link.stop()
            else:
                link.cancel()
                await asyncio.gather(link, return_exceptions=True)
        await self.engine.stop()


async def start_group(cfg: SimConfig, engine: SimEngine, *, host: str) -> list[asyncio.Task[None] | LeaderLink]:
    """A leader listens for its workers and stops the ranks a lost one holds up (every rank of an MoE model,
    only the lost ranks of a dense one); a worker joins and beats."""
    group = cfg.group
    if group is None:
        return []
    if group.headless:
        task = asyncio.create_task(run_worker(group, hung=lambda: engine.faults.hung), name="group-worker")
        return [task]
    link = LeaderLink(group, on_change=engine.wake_all)
    for core in engine.cores:
        core.peers_lost = functools.partial(link.rank_lost, core.index) if cfg.sim.dense else link.incomplete
    await link.start(host)
    return [link]


def worker_control_app(engine: SimEngine) -> web.Application:
    """A headless worker's HTTP: only the simulator's fault and state routes, never the OpenAI API."""

    async def faults_get(_: web.Request) -> web.Response:
        return web.json_response({"faults": engine.faults.describe()})

    async def faults_post(request: web.Request) -> web.Response:
        try:
            fault = parse_fault_json(await request.json(), now=engine.clock.now())
        except (ValueError, FaultError) as err:
            return web.json_response({"error": str(err)}, status=400)
        engine.faults.set(fault)
        log.warning("sim fault set on headless worker: %s", fault.describe())
        return web.json_response({"faults": engine.faults.describe()})

    async def faults_delete(request: web.Request) -> web.Response:
        cleared = engine.faults.clear(request.query.get("fault"))
        return web.json_response({"cleared": cleared, "faults": engine.faults.describe()})

    async def state(_: web.Request) -> web.Response:
        group = engine.cfg.group
        ranks = worker_ranks(group) if group is not None else []
        return web.json_response({"headless": True, "ranks": ranks, "faults": engine.faults.describe()})

    return worker_app(faults_get, faults_post, faults_delete, state)


def apply_bind_env(cfg: SimConfig, env: dict[str, str] | None = None) -> SimConfig:
    environ = dict(os.environ) if env is None else env
    host = environ.get("AIS_SIM_BIND_HOST") or cfg.host
    port = int(environ.get("AIS_SIM_BIND_PORT") or cfg.port)
    return replace(cfg, host=host, port=port)


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def startup_error(cfg: SimConfig) -> str | None:
    """vLLM's refusal when the KV budget cannot hold one max_model_len request plus the batch buffers."""
    kv_error = kvtransfer.config_error(cfg)
    if kv_error:
        return kv_error
    need = cal.startup_kv_need_gib(max_model_len=cfg.max_model_len, max_num_batched_tokens=cfg.max_num_batched_tokens)
    free = cal.kv_free_gib(utilization=cfg.gpu_memory_utilization, tp=cfg.tensor_parallel_size)
    if need <= free:
        return None
    return (
        f"ValueError: To serve at least one request with the models's max seq len ({cfg.max_model_len}), "
        f"({need:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({free:.2f} GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
        f"when initializing the engine."
    )


def _log_config(cfg: SimConfig) -> None:
    log.info("vLLM API server version %s (engine simulator)", cal.VLLM_VERSION)
    log.info("non-default args: %s", {k: v for k, v in cfg.known.items() if k not in ("host", "port")})
    if cfg.dropped:
        log.warning("sim: drop-args fault: ignoring %s", list(cfg.dropped))
    log.info(
        "Initializing a V1 LLM engine (v%s) with config: model=%r, speculative_config=%s, "
        "tensor_parallel_size=%d, data_parallel_size=%d, max_seq_len=%d, compilation_config=%s",
        cal.VLLM_VERSION,
        cfg.model,
        cfg.speculative_config,
        cfg.tensor_parallel_size,
        cfg.data_parallel_size,
        cfg.max_model_len,
        cfg.compilation_config,
    )


async def launch(cfg: SimConfig, *, exit_fn: ExitFn = os._exit, shutdown_timeout: float = 60.0) -> Running | str:
    """Bind, load, check, start. Returns the running server, or the start-up error message.

    `shutdown_timeout`: wall seconds `Running.close()` lets in-flight requests finish (`serve` passes the
    command line's `--shutdown-timeout`; the shared host stops a gone pod's engine within its own grace)."""
    faults = [parse_fault_flag(spec) for spec in cfg.sim.faults]
    sock = bind_socket(cfg.host, cfg.port)
    host, port = sock.getsockname()[:2]
    log.info("sim: bound %s:%d; loading model for %.1f engine s", host, port, cfg.sim.load_seconds)
    _log_config(cfg)
    if cfg.sim.load_seconds > 0:
        try:
            await asyncio.sleep(cfg.sim.load_seconds / cfg.sim.time_scale)
        except asyncio.CancelledError:  # stopped while "loading": free the pod's address for its successor
            sock.close()
            raise
    error = startup_error(cfg)
    if error:
        sock.close()
        return error
    engine = SimEngine(cfg)
    for fault in faults:
        fault = replace(fault, since=engine.clock.now())
        engine.faults.set(fault)
        if fault.name == "crash":
            schedule_crash(engine, fault, exit_fn)
    links = await start_group(cfg, engine, host=host)
    app = (
        worker_control_app(engine)
        if cfg.group is not None and cfg.group.headless
        else build_app(engine, exit_fn=exit_fn)
    )
    if not (cfg.group is not None and cfg.group.headless):
        engine.start()  # a headless worker's ranks are simulated by its leader (aissim/group.py)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    side = await start_side_channel(engine, host=host)
    log.info("GPU KV cache size: %s tokens", f"{engine.cores[0].pool.pool_tokens:,}")
    print(
        f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
        file=sys.stderr,
        flush=True,
    )
    return Running(host=host, port=port, engine=engine, runner=runner, links=links, side=side)


async def start_side_channel(engine: SimEngine, *, host: str) -> web.AppRunner | None:
    """A prefill engine serves its held KV on kv_port of the address it publishes (VLLM_HOST_IP, else the
    engine's own), where a decode engine pulls from."""
    kv = engine.kv
    if kv is None or not kv.produces:
        return None
    runner = web.AppRunner(kv.side_app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, bind_socket(kv.host, kv.port)).start()
    log.info("KV side channel (%s) on %s:%d (engine on %s), engine id %s", kv.role, kv.host, kv.port, host,
             kv.engine_id)  # fmt: skip
    return runner


#: vLLM's HTTP server, once its engine is gone, waits for every open connection to close (uvicorn's graceful
#: shutdown has no timeout there): a process with a client still attached outlives its SIGTERM until that client
#: gives up or the kubelet's SIGKILL. A day stands for "no timeout" (aiohttp reads 0 as none, but not None).
WAIT_FOR_CLIENTS_SECONDS = 86_400.0


def shutdown_seconds(cfg: SimConfig) -> float:
    """Wall seconds in-flight requests may still run after SIGTERM, as `--shutdown-timeout` gives vLLM: 0 (its
    default, mode "abort") stops the engine at once, N (mode "drain") lets it run up to N seconds first
    (vllm/entrypoints/launcher.py:109-123; the option is vllm/engine/arg_utils.py:1579-1583). Engine seconds,
    so a simulator at `--sim-time-scale` drains for N / scale wall seconds, like its loading."""
    raw = cfg.known.get("shutdown_timeout")
    try:
        seconds = int(raw or 0)  # upstream's `type=int`
    except ValueError:
        raise ArgsError(f"vllm serve: error: argument --shutdown-timeout: invalid int value: {raw!r}") from None
    return seconds / cfg.sim.time_scale


async def shut_down(running: Running, *, drain: float) -> None:
    """SIGTERM as vLLM 0.25.1 takes it (seen on the real engine, tests/fidelity): the engine keeps stepping
    until its requests are done or `drain` ran out, then its engine core is killed. A request still unfinished
    is lost; vLLM, racing with the kill, ends its stream with finish_reason "abort", an error event, or nothing
    at all. This does the last: no error, no final chunk, no `[DONE]`, the stream open until the client gives
    up, and the process exits only once every client has gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + drain
    # the step loops finish requests one by one and signal no "all done": a 50 ms poll, during shutdown only
    while any(core.deliveries for core in running.engine.cores) and loop.time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    await running.engine.stop()
    await running.close()


async def serve(cfg: SimConfig) -> int:
    try:
        drain = shutdown_seconds(cfg)
    except ArgsError as exc:
        log.error("%s", exc)
        return 2
    started = await launch(cfg, shutdown_timeout=WAIT_FOR_CLIENTS_SECONDS)
    if isinstance(started, str):
        log.error("%s", started)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("Shutting down")
    await shut_down(started, drain=drain)
    return 0
