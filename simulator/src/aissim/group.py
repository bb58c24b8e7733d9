"""A multi-node engine group in the simulator: a leader that serves and headless workers that join it.

Why: the operator judges a LeaderWorkerSet group through its leader alone, so the simulator must behave
the way vLLM's multi-node data parallelism does when a peer goes away. In vLLM 0.25.1 the API server
runs only on the node without `--headless` (vllm/entrypoints/cli/serve.py:173-191), and every DP rank's
MoE layers exchange tokens with every other rank each step (expert parallelism over all DP x TP
ranks), so one lost or hung peer stops every rank's forward progress while the leader's HTTP server
keeps answering - the seed's "stall with /health 200", group-wide.

Which ranks a lost peer stops depends on the model: vLLM runs the DP ranks of an MoE model in lockstep
(DPEngineCoreProc: an idle rank runs dummy batches and every step all-reduces whether any rank has work,
vllm/v1/engine/core.py:1189-1192 and 1948-1961), so one silent peer stops all; the ranks of a dense model
are independent engines (core.py:1193-1200), so only the lost ranks stop (`--sim-dense`).

Model: the leader simulates all `--data-parallel-size` ranks, one `engine` label each in its /metrics,
because that is where vLLM shows them: the leader's API server manages every rank of an internally
balanced DP group, the `--headless` nodes' ranks included (vllm/v1/engine/core_client.py:600-605), logs
each output batch under its engine index (vllm/v1/engine/async_llm.py:158-160, 696-698), and headless
nodes run no API server at all (vllm/entrypoints/cli/serve.py:173-240). Ranks
`--data-parallel-start-rank .. + --data-parallel-size-local` of each worker progress only while that
worker is alive. A worker
connects over TCP to `--data-parallel-address:--data-parallel-rpc-port` (the leader's pod IP on
loopback), says which ranks it holds and sends a heartbeat every HEARTBEAT_S; a worker that exits,
is stopped (SIGSTOP) or has the `hang` fault stops beating, and after PEER_TIMEOUT_S the leader's
ranks all stop. The worker's compute is not simulated in the worker process: it stands for the peer's
liveness, which is all a lost HCCL peer changes.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

log = logging.getLogger("aissim.group")

#: Wall seconds between worker heartbeats, and of silence after which the leader counts a peer lost.
HEARTBEAT_S = 0.2
PEER_TIMEOUT_S = 1.5


@dataclass(frozen=True, kw_only=True)
class GroupArgs:
    """The multi-node data-parallel flags of one `vllm serve` (vllm/engine/arg_utils.py:1031-1066)."""

    size: int
    """--data-parallel-size: ranks in the whole group."""
    local: int
    """--data-parallel-size-local: ranks on this node."""
    address: str
    """--data-parallel-address: the leader's address."""
    rpc_port: int
    """--data-parallel-rpc-port."""
    start_rank: int
    """--data-parallel-start-rank: first rank on this node (0 on the leader)."""
    headless: bool
    """--headless: a worker, with no API server."""


def group_args(
    *, size: int, local: int | None, address: str | None, rpc_port: int | None, start_rank: int | None, headless: bool
) -> GroupArgs | None:
    """The group of a parsed command line, or None for a single-node engine (all ranks local)."""
    if local is None or (local >= size and not headless):
        return None
    return GroupArgs(
        size=size,
        local=local,
        address=address or "127.0.0.1",
        rpc_port=rpc_port or 29550,  # vLLM 0.25.1 default data_parallel_rpc_port (vllm/config/parallel.py:140)
        start_rank=start_rank or 0,
        headless=headless,
    )


class LeaderLink:
    """The leader's view of its workers: which remote ranks are alive."""

    def __init__(self, group: GroupArgs, *, on_change: Callable[[], None], clock: Callable[[], float] = time.monotonic):
        self.group = group
        self.remote = frozenset(range(group.local, group.size))
        self.beats: dict[int, float] = {}
        self.on_change = on_change
        self.clock = clock
        self._server: asyncio.Server | None = None
        self._watch: asyncio.Task[None] | None = None
        self._complete = False
        self.joined = False
        """Every rank was present once: the frontend starts serving only after every engine's handshake
        (vllm/v1/engine/core_client.py:615-633), so before that no rank runs."""

    def complete(self) -> bool:
        """Every remote rank has beaten within PEER_TIMEOUT_S."""
        now = self.clock()
        return all(now - self.beats.get(rank, -1e18) <= PEER_TIMEOUT_S for rank in self.remote)

    def incomplete(self) -> bool:
        """An MoE model's ranks all wait while any peer is missing."""
        return not self.complete()

    def rank_lost(self, rank: int) -> bool:
        """A dense model's rank waits only for itself: blocked before the group first formed, or when the
        rank is a remote one whose worker went silent."""
        if not self.joined:
            self.joined = self.complete()
        return not self.joined or rank in self.lost()

    def lost(self) -> list[int]:
        """Remote ranks without a recent heartbeat."""
        now = self.clock()
        return sorted(r for r in self.remote if now - self.beats.get(r, -1e18) > PEER_TIMEOUT_S)

    async def start(self, host: str) -> None:
        self._server = await asyncio.start_server(self._handle, host, self.group.rpc_port)
        self._watch = asyncio.create_task(self._watch_loop(), name="group-watch")
        log.info("group leader: waiting for ranks %s on %s:%d", sorted(self.remote), host, self.group.rpc_port)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ranks: list[int] = []
        try:
            hello = (await reader.readline()).decode().split()
            if hello[:1] != ["ranks"]:
                return
            ranks = [int(r) for r in hello[1:] if int(r) in self.remote]
            log.info("group leader: ranks %s joined", ranks)
            while line := await reader.readline():
                if line.strip() == b"beat":
                    now = self.clock()
                    for rank in ranks:
                        self.beats[rank] = now
        except (OSError, ValueError):
            pass
        finally:
            for rank in ranks:  # a closed connection is a lost peer at once
                self.beats.pop(rank, None)
            writer.close()
            log.warning("group leader: ranks %s disconnected", ranks)

    async def _watch_loop(self) -> None:
        while True:
            complete = self.complete()
            if complete != self._complete:
                self._complete = complete
                if complete:
                    self.joined = True
                    log.info("group leader: all %d ranks present", self.group.size)
                else:
                    log.warning("group leader: lost ranks %s", self.lost())
                self.on_change()
            await asyncio.sleep(HEARTBEAT_S / 2)


def worker_ranks(group: GroupArgs) -> list[int]:
    """The ranks a worker holds."""
    return list(range(group.start_rank, group.start_rank + group.local))


async def run_worker(group: GroupArgs, *, hung: Callable[[], bool]) -> None:
    """Join the leader and beat until cancelled; reconnect when the leader is not there (yet)."""
    ranks = " ".join(str(r) for r in worker_ranks(group))
    while True:
        try:
            _, writer = await asyncio.open_connection(group.address, group.rpc_port)
        except OSError:
            await asyncio.sleep(HEARTBEAT_S)
            continue
        log.info("group worker: ranks %s joined %s:%d", ranks, group.address, group.rpc_port)
        try:
            writer.write(f"ranks {ranks}\n".encode())
            while True:
                if not hung():
                    writer.write(b"beat\n")
                await writer.drain()
                await asyncio.sleep(HEARTBEAT_S)
        except OSError:
            log.warning("group worker: lost the leader; reconnecting")
        finally:
            writer.close()
        await asyncio.sleep(HEARTBEAT_S)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def worker_app(faults_get: Handler, faults_post: Handler, faults_delete: Handler, state: Handler) -> web.Application:
    """A headless worker serves no OpenAI API; only the simulator's own fault and state routes."""
    app = web.Application()
    app.router.add_get("/sim/faults", faults_get)
    app.router.add_post("/sim/faults", faults_post)
    app.router.add_delete("/sim/faults", faults_delete)
    app.router.add_get("/sim/state", state)
    return app
