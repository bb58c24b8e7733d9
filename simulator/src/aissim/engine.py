"""The async engine: a scaled clock, one step loop per data-parallel engine, and request delivery.

Why this module exists: the scheduler says what a step computes and what it costs in engine seconds; this
module makes those seconds pass. Engine time is wall time x the time-scale factor (`--sim-time-scale`), the
one factor every latency and rate goes through. Steps are paced against absolute deadlines, and all
reported times (TTFT, ITL, e2e) are the steps' own engine times, so metrics are exact however the host
schedules the process; if the host falls behind, engine time slows down rather than jumping ahead.

An engine with nothing to do, or one that is hung or stalled by a fault, awaits an asyncio.Event: an idle
simulator uses no CPU, which is what lets twenty of them share two cores.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aissim import calibration as cal
from aissim.args import SimConfig
from aissim.clock import MAX_LAG_WALL_S, Delivery, EngineClock
from aissim.faults import FaultState
from aissim.kvcache import KVPool, PrefixCache
from aissim.kvtransfer import KVTransfer
from aissim.metrics import VllmMetrics, cache_config_info
from aissim.parsers import ToolParserMetrics
from aissim.scheduler import Scheduler, SimRequest
from aissim.specdecode import AcceptanceStream
from aissim.tokens import PromptTokens, natural_length

#: Requests whose engine times GET /sim/requests keeps (a bench point's worth, many times over).
RECENT_REQUESTS = 4096
#: Engine seconds from the busy loop reading a request to the next schedule() (the least queue time vLLM
#: reports): 3.7e-05 s on vLLM 0.25.1 (CPU) for the request the fidelity tier sends into a hang.
READ_TO_SCHEDULE_S = 4e-05


class EngineCore:
    """One data-parallel engine: scheduler plus the step loop."""

    def __init__(
        self, *, index: int, cfg: SimConfig, clock: EngineClock, faults: FaultState, metrics: VllmMetrics
    ) -> None:
        self.index = index
        self.cfg = cfg
        self.clock = clock
        self.faults = faults
        self.metrics = metrics
        tp = cfg.tensor_parallel_size
        pool_tokens = cal.kv_pool_tokens(utilization=cfg.gpu_memory_utilization, tp=tp)
        self.pool = KVPool(pool_tokens=pool_tokens, block_size=cfg.block_size)
        self.cache = PrefixCache(
            capacity_blocks=self.pool.total_blocks,
            block_size=cfg.block_size,
            enabled=cfg.enable_prefix_caching,
        )
        self.sched = Scheduler(
            max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            num_spec_tokens=cfg.num_speculative_tokens,
            tp=tp,
            pool=self.pool,
            cache=self.cache,
            long_prefill_token_threshold=int(cfg.known.get("long_prefill_token_threshold") or 0),
        )
        self.deliveries: dict[SimRequest, Delivery] = {}
        self.wake = asyncio.Event()
        self.engine_time = 0.0  # end of the last step
        self.busy_seconds = 0.0  # engine seconds spent in steps (idle and blocked time excluded)
        self.stalled = False
        self._prev_end: float | None = None
        #: Engine time from which the busy loop reads its input: the end of the last step, or the resume of a
        #: stopped engine core (a request that arrives before then waits in the socket, unread).
        self._reading_since = 0.0
        #: True while a peer of a multi-node group is lost: every rank's collectives wait (aissim/group.py).
        self.peers_lost: Callable[[], bool] = lambda: False
        self._waiting_for_wake = False
        #: The server's KV connector when `--kv-transfer-config` gives a role (prefill/decode engines).
        self.kv: KVTransfer | None = None

    def submit(self, req: SimRequest) -> Delivery:
        """A new request reaches the scheduler; the gauges see it only after the engine core's next step."""
        delivery = Delivery(req)
        self.deliveries[req] = delivery
        self.sched.add(req)
        self.wake.set()
        return delivery

    def abort(self, req: SimRequest) -> None:
        """The client went away. vLLM counts no finished request for it: AsyncLLM.abort drops its state from
        the OutputProcessor without stats (vllm/v1/engine/async_llm.py:591-593, 709-718; output_processor.py
        450-507), and outputs that come later for it are ignored (output_processor.py:608-611), so
        `vllm:request_success{finished_reason="abort"}` does not move. The scheduler frees it
        (core.py:409-415) and its next step's stats show it gone."""
        self.deliveries.pop(req, None)
        if self.sched.abort(req):
            self.wake.set()

    @property
    def parked(self) -> bool:
        """The step loop waits on its wake event and no wake is pending: idle, hung, stalled or holding a step
        while frozen. Until a request, an abort, a fault change or a peer wakes it, nothing happens (no step,
        no stats), so a test can say "nothing more will happen" without sleeping."""
        return self._waiting_for_wake and not self.wake.is_set()

    async def _park(self) -> None:
        self.wake.clear()
        self._waiting_for_wake = True
        try:
            await self.wake.wait()
        finally:
            self._waiting_for_wake = False

    @property
    def frozen(self) -> bool:
        """The engine core process does not run: `hang` (a SIGSTOPped EngineCore) or, in a multi-node group, a
        lost peer its collectives wait for. It steps no more, so it ships no SchedulerStats and no outputs, and
        every series fed by them keeps its last value (see metrics.py), while the API server still answers."""
        return self.faults.hung or self.peers_lost()

    def _publish(self, *, queries: int, hits: int) -> None:
        self.metrics.set_scheduler_state(
            engine=self.index,
            running=len(self.sched.running),
            waiting=len(self.sched.waiting),
            deferred=self.sched.num_deferred,
            kv_usage=self.pool.usage,
            queries=queries,
            hits=hits,
        )

    def _blocked(self) -> bool:
        self.stalled = self.faults.stalled(kv_usage=self.pool.usage)
        return self.frozen or self.stalled or not self.sched.has_work

    def _start_time(self) -> float:
        """Back-to-back steps start where the last ended. From idle, a step starts when the first waiting
        request arrived: a real engine wakes in microseconds, and the event loop's wake-up latency must not
        be multiplied by the time scale into seconds of fake queueing."""
        now = self.clock.now()
        if self._prev_end is not None:
            if (now - self._prev_end) / self.clock.scale > MAX_LAG_WALL_S:
                self.clock.slip_to(self._prev_end)
            return self._prev_end
        due = [r.kv_ready_at or r.arrival for r in self.sched.waiting if r.kv_state != "pulling"]
        if due:  # a decode request is due when its KV arrived, not when it did
            return min(now, max(self._reading_since, due[0]))
        return now

    def _read_input(self, start: float) -> float:
        """The busy loop reads its input queue between steps, and add_request stamps each request QUEUED then
        (vllm/v1/engine/core.py:1259-1298, vllm/v1/core/sched/scheduler.py:2034); the next schedule() stamps
        SCHEDULED (scheduler.py:430, 971-972), and queue time is the difference (vllm/v1/metrics/stats.py
        439-440). So a request is queued from its arrival at an idle core, from the end of the step in flight
        when it arrived, or from the resume of a stopped core, never from the seconds it sat unread; and its
        queue time is never 0. Returns the step's start, moved past the read by READ_TO_SCHEDULE_S."""
        read: float | None = None
        for req in self.sched.waiting:
            if req.queued_at is None:
                req.arrival = min(req.arrival, start)  # arrived while the host lagged: see EngineClock.slip_to
                req.queued_at = min(max(req.arrival, self._reading_since), start)
                read = req.queued_at if read is None else max(read, req.queued_at)
        return start if read is None else max(start, read + READ_TO_SCHEDULE_S)

    async def run(self) -> None:
        while True:
            if self._blocked():
                frozen = self.frozen
                if not frozen:
                    # A live engine core with nothing it can schedule still loops, and each loop's
                    # update_from_output ships SchedulerStats (scheduler.py:1839-1849): new arrivals show
                    # as waiting, an aborted request as gone.
                    self._publish(queries=0, hits=0)
                self._prev_end = None
                await self._park()
                if frozen and not self.frozen:
                    self._reading_since = self.clock.now()  # resumed: it reads what arrived while stopped
                continue
            start = self._read_input(self._start_time())
            plan = self.sched.plan(now=start)
            for req in plan.pulls:
                assert self.kv is not None
                self.kv.start_pull(req, self._kv_arrived)
            if plan.empty:  # work exists but none fits (e.g. a prompt larger than the whole pool)
                self._publish(queries=0, hits=0)
                self._prev_end = None
                await self._park()
                continue
            seconds = self.sched.step_seconds(plan) * self.faults.step_multiplier(now=start)
            end = start + seconds
            delay = self.clock.wall_delay(end)
            await asyncio.sleep(delay if delay > 0 else 0)
            if self.frozen:  # stopped mid-step: the step ends only when the process runs again
                while self.frozen:
                    await self._park()
                end = max(end, self.clock.now())
            it, emitted = self.sched.complete(plan, end=end)
            self.engine_time = end
            self.busy_seconds += seconds
            self._prev_end = end
            self._reading_since = end
            if emitted:
                # vLLM builds IterationStats only for a step that returned request outputs
                # (vllm/v1/engine/async_llm.py:663, contract.vllm_metrics.Update.STEP_WITH_OUTPUTS): a partial
                # prefill chunk moves no token counter and no iteration histogram, only the KV gauge.
                self.metrics.record_iteration(engine=self.index, it=it)
            self._publish(queries=plan.queries, hits=plan.hits)
            for req, new in emitted:
                if req.kv_held and req.kv_params is None and self.kv is not None:
                    req.kv_params = self.kv.hold(self, req)
                delivery = self.deliveries.get(req)
                if delivery is not None:
                    delivery.push(new)
                    if req.finished:
                        del self.deliveries[req]

    def _kv_arrived(self, req: SimRequest, ok: bool) -> None:
        """A decode request's KV is here (it runs next step) or could not be pulled (it fails now)."""
        now = self.clock.now()
        req.kv_ready_at = now
        recompute = self.kv is not None and self.kv.recompute_failed_loads
        failed = self.sched.kv_arrived(req, ok=ok, now=now, recompute=recompute)
        if failed is not None:
            self.metrics.record_iteration(engine=self.index, it=failed)
            delivery = self.deliveries.pop(req, None)
            if delivery is not None:
                delivery.push(0)
        self.wake.set()

    def state(self) -> dict[str, object]:
        return {
            "engine": self.index,
            "running": len(self.sched.running),
            "waiting": len(self.sched.waiting),
            "kv_cache_usage": round(self.pool.usage, 6),
            "kv_pool_tokens": self.pool.pool_tokens,
            "kv_blocks_total": self.pool.total_blocks,
            "steps": self.sched.steps,
            "stalled": self.stalled,
            "parked": self.parked,
            "last_step_end_engine_s": round(self.engine_time, 6),
            "busy_engine_s": self.busy_seconds,
        }


class SimEngine:
    """All data-parallel engines of one server, sharing a clock, faults and a metrics registry."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.clock = EngineClock(cfg.sim.time_scale)
        self.faults = FaultState()
        tp = cfg.tensor_parallel_size
        pool_tokens = cal.kv_pool_tokens(utilization=cfg.gpu_memory_utilization, tp=tp)
        pool = KVPool(pool_tokens=pool_tokens, block_size=cfg.block_size)  # each engine core's, as built below
        self.metrics = VllmMetrics(
            model_name=cfg.served_model_name,
            num_engines=max(1, cfg.data_parallel_size),
            max_model_len=cfg.max_model_len,
            num_spec_tokens=cfg.num_speculative_tokens,
            cache_config_info=cache_config_info(
                block_size=cfg.reported_block_size,
                gpu_memory_utilization=cfg.gpu_memory_utilization,
                enable_prefix_caching=cfg.enable_prefix_caching,
                num_gpu_blocks=pool_tokens // cfg.block_size,
                user_specified_block_size=cfg.requested_block_size is not None,
                kv_cache_size_tokens=pool_tokens,
                kv_cache_max_concurrency=pool.max_concurrency(cfg.max_model_len),
            ),
        )
        known = cfg.known
        self.tool_parser = ToolParserMetrics(
            registry=self.metrics.registry,
            model_name=cfg.served_model_name,
            tool_call_parser=known.get("tool_call_parser"),
            enable_auto_tool_choice=bool(known.get("enable_auto_tool_choice")),
            reasoning_parser=known.get("reasoning_parser"),
        )
        self.cores = [
            EngineCore(index=i, cfg=cfg, clock=self.clock, faults=self.faults, metrics=self.metrics)
            for i in range(max(1, cfg.data_parallel_size))
        ]
        self.rates = cal.acceptance_rates(profile=cfg.sim.acceptance_profile, k=cfg.num_speculative_tokens)
        self._ids = itertools.count()
        #: The latest requests by response id (the `id` of their response), for GET /sim/requests.
        self.recent: OrderedDict[str, SimRequest] = OrderedDict()
        self._tasks: list[asyncio.Task[None]] = []
        self.kv: KVTransfer | None = None
        if cfg.kv_transfer_config and cfg.kv_transfer_config.get("kv_role"):
            self.kv = KVTransfer(cfg, faults=self.faults, clock_scale=cfg.sim.time_scale)
            for core in self.cores:
                core.kv = self.kv

    def start(self) -> None:
        self._tasks = [asyncio.create_task(core.run(), name=f"engine-{core.index}") for core in self.cores]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.kv is not None:
            await self.kv.close()

    def wake_all(self) -> None:
        for core in self.cores:
            core.wake.set()
        if self.kv is not None:
            self.kv.poke()

    def submit(
        self,
        *,
        prompt: PromptTokens,
        max_tokens: int,
        ignore_eos: bool,
        n: int = 1,
        kv_transfer_params: dict[str, Any] | None = None,
        response_id: str | None = None,
    ) -> tuple[EngineCore, Delivery]:
        """Route to the least-loaded engine (vLLM's DP coordinator balances on queue lengths)."""
        core = min(self.cores, key=lambda c: (c.sched.load, c.index))
        rid = f"sim-{next(self._ids)}"
        target = max_tokens if ignore_eos else min(max_tokens, natural_length(prompt.seed))
        accept = None
        if self.rates:
            accept = AcceptanceStream(rates=self.rates, seed=prompt.seed ^ (self.cfg.sim.seed * 7919))
        req = SimRequest(
            rid=rid,
            prompt=prompt,
            max_tokens=max_tokens,
            target_tokens=max(1, target),
            stop_reason="length" if target >= max_tokens else "stop",
            arrival=self.clock.now(),
            accept=accept,
            n=n,
        )
        if self.kv is not None:
            self.kv.classify(req, kv_transfer_params)
        if response_id is not None:
            self.recent[response_id] = req
            while len(self.recent) > RECENT_REQUESTS:
                self.recent.popitem(last=False)
        return core, core.submit(req)

    def request_times(self, response_id: str) -> dict[str, object] | None:
        """One recent request on the engine clock: when it arrived, its first and last token, its output by
        step, and whether its prompt's KV came from another engine (a P/D decode request: its arrival here is
        after its prefill elsewhere, so its TTFT is not the client's)."""
        req = self.recent.get(response_id)
        if req is None:
            return None
        return {
            "arrival_s": req.arrival,
            "first_token_s": req.first_token_at,
            "last_token_s": req.last_token_at,
            "finished": req.finished,
            "output_tokens": req.output_tokens,
            "remote_prefill": req.external_tokens > 0 or req.remote is not None,
            "emits": [[round(t, 6), n] for t, n in req.emits],
        }

    def state(self) -> dict[str, object]:
        return {
            "engine_time_s": round(self.clock.now(), 6),
            "time_scale": self.clock.scale,
            "engines": [core.state() for core in self.cores],
            "faults": self.faults.describe(),
            **({"kv_transfer": self.kv.state()} if self.kv is not None else {}),
        }
