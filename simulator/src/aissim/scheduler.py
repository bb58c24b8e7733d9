"""One engine's scheduler: running slots, waiting queue, chunked prefill, preemption, step accounting.

Why this module exists: the seed's throughput and latency figures are consequences of vLLM V1's scheduling
(32 running slots make C64 add no throughput, MBT bounds each step's prefill, a full KV pool preempts);
reproducing them needs the same rules, not a formula. Pure state transitions live here - plan a step,
price it in engine seconds, complete it - so the async engine loop only adds time and I/O.

Rules, after vllm/v1/core/sched/scheduler.py: running requests first (decodes cost 1 + k tokens of the
batch budget, partial prefills continue), then waiting requests in FIFO order while slots, budget and KV
last; a prefill chunk is at most the remaining budget (`--max-num-batched-tokens`) and, with
`--long-prefill-token-threshold` T > 0, at most T tokens of one request, in both paths (:478-479 running,
:827-829 waiting): a long prompt then leaves the rest of the budget to the requests behind it. The running
path caps a speculative decode the same way (its 1 + k tokens; T < 1 + k verifies T - 1 drafts). vLLM 0.25.1
has no partial-prefill limit in this scheduler: `--max-num-partial-prefills` / `--max-long-partial-prefills`
other than 1 do not start (vllm/engine/arg_utils.py:2369-2379; aissim/args.py). When a running request
cannot grow, the most recently admitted running request is preempted (recompute: its KV is freed and it
re-prefills prompt + output later). The prefill-completing step samples the first token; every later step
verifies k drafted tokens and advances 1 + accepted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from aissim import calibration as cal
from aissim.kvcache import KVPool, PrefixCache
from aissim.metrics import FinishedRequest, IterationRecord
from aissim.specdecode import AcceptanceStream
from aissim.tokens import PromptTokens


@dataclass(eq=False)
class SimRequest:
    """A generation request as the engine tracks it (times are engine seconds)."""

    rid: str
    prompt: PromptTokens
    max_tokens: int
    target_tokens: int  # tokens to produce before finishing (max_tokens, or the natural EOS point)
    stop_reason: str  # "length" when target == max_tokens, else "stop"
    arrival: float
    """When the API server got it (e2e latency and TTFT count from here)."""
    accept: AcceptanceStream | None = None
    n: int = 1
    prefill_len: int = 0  # tokens to compute before decoding (prompt, or prompt + output after preemption)
    num_computed: int = 0  # tokens whose KV exists (prompt and output)
    cached_tokens: int = 0  # prompt tokens served from the prefix cache at first admission
    output_tokens: int = 0
    queued_at: float | None = None
    """When the engine core read it (EngineCoreEventType.QUEUED; set by the engine loop)."""
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finish_reason: str | None = None
    admitted_once: bool = False
    # Prefill/decode disaggregation (aissim/kvtransfer.py):
    remote: object | None = None
    """A decode engine's request: where its prompt's KV is (kvtransfer.RemoteSource)."""
    kv_state: str = ""
    """"" computes its prompt; "new": to pull; "pulling": blocks allocated, KV on its way; "ready": KV here."""
    hold_kv: bool = False
    """A prefill engine's request: keep the KV if it finishes at max_tokens (the connector's delayed free)."""
    kv_held: bool = False
    kv_ready_at: float | None = None
    """Engine time its pull ended (a step for it starts no earlier)."""
    external_tokens: int = 0
    """Prompt tokens whose KV came from another engine (prompt_tokens_by_source `external_kv_transfer`)."""
    kv_params: dict[str, object] | None = None
    """The kv_transfer_params the response carries (a prefill that kept its KV)."""
    emits: list[tuple[float, int]] = field(default_factory=list)
    """(engine time, output tokens so far) at each step that gave it tokens: GET /sim/requests (the bench's
    engine-clock view of one request; vLLM keeps the same times per request, RequestStateStats)."""

    def __post_init__(self) -> None:
        if self.prefill_len == 0:
            self.prefill_len = self.prompt.num_tokens

    @property
    def num_cached_tokens(self) -> int:
        """PrefillStats.num_cached_tokens of its first scheduling: local prefix-cache hits plus tokens whose KV
        another engine sent (vllm/v1/metrics/stats.py:266, set at vllm/v1/core/sched/scheduler.py:778-784)."""
        return self.cached_tokens + self.external_tokens

    @property
    def prefill_done(self) -> bool:
        return self.num_computed >= self.prefill_len

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class StepPlan:
    """What one engine step computes."""

    decode: list[SimRequest] = field(default_factory=list)
    prefill: list[tuple[SimRequest, int, int]] = field(default_factory=list)  # (request, start, end)
    num_preempted: int = 0
    queries: int = 0
    hits: int = 0
    pulls: list[SimRequest] = field(default_factory=list)
    """Decode requests whose blocks were allocated this step: their KV is to be pulled now."""
    drafts: dict[SimRequest, int] = field(default_factory=dict)
    """Decodes verifying fewer than k drafts: the long-prefill threshold capped their 1 + k tokens."""

    @property
    def empty(self) -> bool:
        return not self.decode and not self.prefill


class Scheduler:
    """Scheduling state of one engine core."""

    def __init__(
        self,
        *,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        num_spec_tokens: int,
        tp: int,
        pool: KVPool,
        cache: PrefixCache,
        long_prefill_token_threshold: int = 0,
    ) -> None:
        self.max_num_seqs = max_num_seqs
        self.threshold = long_prefill_token_threshold
        self.mbt = max_num_batched_tokens
        self.k = num_spec_tokens
        self.tp = tp
        self.pool = pool
        self.cache = cache
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.steps = 0

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    @property
    def num_deferred(self) -> int:
        """vLLM's `len(self.skipped_waiting)` (SchedulerStats.num_skipped_waiting_reqs, vllm 0.25.1
        vllm/v1/core/sched/scheduler.py:2303), exported as `deferred` (vllm/v1/metrics/loggers.py:1083-1085).
        A decode request enters skipped_waiting when its blocks are allocated (WAITING_FOR_REMOTE_KVS,
        scheduler.py:947-951) and leaves it only when the waiting loop promotes and schedules it
        (_try_promote_blocked_waiting_request, :2441-2453); that loop breaks while running is at max_num_seqs
        (:640-645), so a request whose KV has arrived stays `deferred` until a running slot frees. Here: a
        decode request pulling ("pulling") or pulled but not yet admitted ("ready")."""
        return sum(1 for r in self.waiting if r.kv_state in ("pulling", "ready"))

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> bool:
        """Drop a request (client went away); True if it was still queued or running."""
        if req in self.running:
            self.running.remove(req)
            self.pool.free(req.rid)
        elif req in self.waiting:
            self.waiting.remove(req)
            self.pool.free(req.rid)  # a decode request waiting for its KV holds its prompt's blocks
        else:
            return False
        req.finish_reason = "abort"
        return True

    def _preempt(self, victim: SimRequest) -> None:
        self.running.remove(victim)
        self.pool.free(victim.rid)
        victim.prefill_len = victim.num_computed
        victim.num_computed = 0
        victim.kv_state = ""  # recomputed here: its pulled KV was freed with the rest
        self.waiting.appendleft(victim)

    def plan(self, *, now: float) -> StepPlan:
        """Choose this step's work and reserve its KV (mutates slots and pool)."""
        plan = StepPlan()
        budget = self.mbt
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if req.prefill_done:
                cost = self._capped(1 + self.k)
                new_ctx = req.num_computed + cost
                if cost < 1 + self.k:
                    plan.drafts[req] = cost - 1
            else:
                cost = min(self._capped(req.prefill_len - req.num_computed), budget)
                new_ctx = req.num_computed + cost
            if cost > budget:
                break
            while not self.pool.can_grow(req.rid, new_ctx) and self.running:
                victim = self.running[-1]
                self._preempt(victim)
                plan.num_preempted += 1
                if victim is req:
                    break
            if req not in self.running:
                break
            self.pool.grow(req.rid, new_ctx)
            budget -= cost
            if req.prefill_done:
                plan.decode.append(req)
            else:
                plan.prefill.append((req, req.num_computed, new_ctx))
            i += 1
        if not plan.num_preempted and len(self.running) < self.max_num_seqs:
            self._allocate_pulls(plan)
        while not plan.num_preempted and budget > 0 and len(self.running) < self.max_num_seqs:
            waiting = self._next_waiting()
            if waiting is None:
                break
            req = waiting
            remote = req.kv_state == "ready"
            if remote:  # its prompt's KV arrived: only the last prompt token is computed here
                hit = req.prefill_len - 1
            else:
                hit = self.cache.lookup(req.prompt.block_hashes, req.prompt.num_tokens, count=False)
                hit = min(hit, req.prefill_len - 1)
            chunk = min(self._capped(req.prefill_len - hit), budget)  # scheduler.py:827-829, then the budget
            if not self.pool.can_grow(req.rid, hit + chunk):
                break
            if not remote:
                self.cache.lookup(req.prompt.block_hashes, req.prompt.num_tokens, count=True)
                plan.queries += req.prompt.num_tokens if self.cache.enabled else 0
                plan.hits += hit
            self.waiting.remove(req)
            self.running.append(req)
            if not req.admitted_once:
                req.cached_tokens = 0 if remote else hit
                req.external_tokens = req.prompt.num_tokens if remote else 0
                req.admitted_once = True
            if req.scheduled_at is None:
                req.arrival = min(req.arrival, now)
                req.scheduled_at = now
            req.num_computed = hit
            self.pool.grow(req.rid, hit + chunk)
            budget -= chunk
            plan.prefill.append((req, hit, hit + chunk))
        return plan

    def _capped(self, num_new_tokens: int) -> int:
        """`if 0 < long_prefill_token_threshold < num_new_tokens: num_new_tokens = threshold`
        (vllm/v1/core/sched/scheduler.py:478-479 for running requests, :827-829 for waiting ones)."""
        return self.threshold if 0 < self.threshold < num_new_tokens else num_new_tokens

    def _allocate_pulls(self, plan: StepPlan) -> None:
        """Decode requests in arrival order get blocks for their whole prompt and wait for its KV
        (WAITING_FOR_REMOTE_KVS); the first that does not fit stops the rest, as any waiting request does."""
        for req in self.waiting:
            if req.kv_state != "new":
                continue
            if not self.pool.can_grow(req.rid, req.prompt.num_tokens):
                return
            self.pool.grow(req.rid, req.prompt.num_tokens)
            req.kv_state = "pulling"
            plan.pulls.append(req)

    def _next_waiting(self) -> SimRequest | None:
        """The first waiting request that can run: a decode request whose KV arrived first (FCFS takes
        skipped_waiting before waiting, scheduler.py:1867-1869), then in arrival order; one waiting for its KV
        is passed over (vLLM skips it), one whose blocks could not be allocated stops admission."""
        ready = next((req for req in self.waiting if req.kv_state == "ready"), None)
        if ready is not None:
            return ready
        for req in self.waiting:
            if req.kv_state == "pulling":
                continue
            return None if req.kv_state == "new" else req
        return None

    def kv_arrived(self, req: SimRequest, *, ok: bool, now: float, recompute: bool = False) -> IterationRecord | None:
        """A decode request's pull ended. Its KV is here; or, not pulled, the request computes its prompt here
        (kv_load_failure_policy "recompute": its blocks freed, num_computed_tokens back to 0) or fails with
        finish reason `error` ("fail"); returns the failed request's stats."""
        if req.finished or req not in self.waiting:
            return None
        if ok:
            req.kv_state = "ready"
            return None
        if recompute:
            self.pool.free(req.rid)
            req.kv_state = ""
            return None
        self.waiting.remove(req)
        self.pool.free(req.rid)
        req.finish_reason = "error"
        it = IterationRecord(accepted_per_pos=[0] * self.k)
        it.finished.append(_finished_stats(req, now))
        return it

    def step_seconds(self, plan: StepPlan) -> float:
        """Engine seconds of this step: a decode step for the batch plus each prefill chunk's share."""
        seconds = 0.0
        if plan.decode:
            seconds += cal.decode_step_s(batch=len(plan.decode), tp=self.tp, num_speculative_tokens=self.k)
        for _, start, end in plan.prefill:
            seconds += cal.prefill_chunk_s(start=start, end=end, tp=self.tp)
        if plan.prefill and not plan.decode:  # a step of prefill chunks only still runs one whole forward
            tokens = sum(end - start for _, start, end in plan.prefill)
            seconds += cal.prefill_step_overhead_s(tokens=tokens, tp=self.tp)
        # A forward pass is never cheaper than a one-sequence decode step (fully cached prompts).
        return max(seconds, cal.decode_tpot_s(batch=1, tp=self.tp))

    def complete(self, plan: StepPlan, *, end: float) -> tuple[IterationRecord, list[tuple[SimRequest, int]]]:
        """Apply a finished step: advance prefills, emit tokens, finish requests, collect stats."""
        self.steps += 1
        it = IterationRecord(num_preempted_reqs=plan.num_preempted, accepted_per_pos=[0] * self.k)
        emitted: list[tuple[SimRequest, int]] = []
        for req, _start, chunk_end in plan.prefill:
            if req.finished:
                continue
            req.num_computed = chunk_end
            if not req.prefill_done:
                continue
            if req.first_token_at is None:
                req.first_token_at = end
                it.time_to_first_tokens.append(end - req.arrival)
                it.num_prompt_tokens += req.prompt.num_tokens
                it.num_cached_prompt_tokens += req.cached_tokens  # the first admission's PrefillStats
                it.num_external_prompt_tokens += req.external_tokens
                self.cache.insert(req.prompt.block_hashes)
            elif req.last_token_at is not None:
                it.inter_token_latencies.append(end - req.last_token_at)
            emitted.append((req, self._emit(req, 1, end, it)))
        for req in plan.decode:
            if req.finished:
                continue
            accepted = 0
            if self.k and req.accept is not None:
                drafts = plan.drafts.get(req, self.k)
                accepted = min(req.accept.next_accepted(), drafts)  # acceptance is a prefix of the drafts
                it.num_drafts += 1
                it.num_draft_tokens += drafts
                it.num_accepted_tokens += accepted
                for pos in range(accepted):
                    it.accepted_per_pos[pos] += 1
            if req.last_token_at is not None:
                it.inter_token_latencies.append(end - req.last_token_at)
            new = min(1 + accepted, req.target_tokens - req.output_tokens)
            emitted.append((req, self._emit(req, new, end, it)))
        return it, emitted

    def _emit(self, req: SimRequest, new: int, end: float, it: IterationRecord) -> int:
        req.output_tokens += new
        req.num_computed += new
        req.last_token_at = end
        req.emits.append((end, req.output_tokens))
        it.num_generation_tokens += new
        if req.output_tokens >= req.target_tokens:
            req.finish_reason = req.stop_reason
            self.running.remove(req)
            if req.hold_kv and req.finish_reason == "length":
                req.kv_held = True  # the connector frees it once pulled (mooncake_connector.py:1841-1872)
            else:
                self.pool.free(req.rid)
            it.finished.append(_finished_stats(req, end))
            # ParentRequest.observe_finished_request, called by the output processor for each finished request
            # (vllm/v1/engine/output_processor.py:816-818, parallel_sampling.py:134-150): n, and the tokens the
            # request generated (the most of its n samples), not its max_tokens.
            it.n_params.append(req.n)
            it.max_num_generation_tokens.append(req.output_tokens)
        return new


def _finished_stats(req: SimRequest, end: float) -> FinishedRequest:
    scheduled = req.scheduled_at if req.scheduled_at is not None else req.arrival
    queued = req.queued_at if req.queued_at is not None else req.arrival
    first = req.first_token_at if req.first_token_at is not None else end
    decode = end - first
    return FinishedRequest(
        finish_reason=req.finish_reason or "stop",
        e2e_latency=end - req.arrival,
        num_prompt_tokens=req.prompt.num_tokens,
        num_generation_tokens=req.output_tokens,
        max_tokens_param=req.max_tokens,
        queued_time=max(0.0, scheduled - queued),
        prefill_time=max(0.0, first - scheduled),
        inference_time=max(0.0, end - scheduled),
        decode_time=max(0.0, decode),
        mean_time_per_output_token=decode / (req.output_tokens - 1) if req.output_tokens > 1 else 0.0,
        num_cached_tokens=req.num_cached_tokens,
    )
