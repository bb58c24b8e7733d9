"""HTTP I/O of the bench: one OpenAI-compatible endpoint, its /metrics, /v1/models, /version, /sim/state.

Why this module exists: everything the bench learns from an engine goes through here, so the scenario code
and the rules stay pure. Requests are streamed `/v1/completions` with `ignore_eos` (a vLLM sampling
extension, vllm/sampling_params.py) and `stream_options.include_usage`, so the client sees its own first
token and the engine's usage counts (prompt, completion and `prompt_tokens_details.cached_tokens`) in one
request. A failure of any kind becomes a failed `RequestRecord`, never an exception: the rules decide.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from ascend_operator.bench import snapshots as m
from ascend_operator.bench.rules import Clock, RequestRecord


class Endpoint:
    """One base URL (an engine pod, a Service, a simulator) and the session that talks to it."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base: str,
        label: str,
        *,
        timeout_s: float,
        metrics_urls: Sequence[str] = (),
    ) -> None:
        self.session = session
        self.base = base.rstrip("/")
        # A Service's counters live on its pods: scrape all of them and sum.
        self.metrics_urls = [u.rstrip("/") for u in metrics_urls] or [self.base]
        self.label = label
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def _json(self, path: str) -> Any:
        async with self.session.get(self.base + path, timeout=aiohttp.ClientTimeout(total=30)) as resp:
            resp.raise_for_status()
            return await resp.json()

    async def _scrape(self, base: str) -> m.Snapshot:
        async with self.session.get(base + "/metrics", timeout=aiohttp.ClientTimeout(total=30)) as resp:
            resp.raise_for_status()
            return m.parse_metrics(await resp.text())

    async def snapshot(self) -> m.Snapshot:
        return m.merge(await asyncio.gather(*(self._scrape(u) for u in self.metrics_urls)))

    async def busy_seconds(self) -> dict[str, float] | None:
        """aissim only: each engine's busy engine seconds so far, keyed like Snapshot.per_engine."""
        states = await asyncio.gather(*(self.sim_state(u) for u in self.metrics_urls))
        out: dict[str, float] = {}
        for i, state in enumerate(states):
            if state is None:
                return None
            for engine in state.get("engines", []):
                key = f"{i}/{engine['engine']}" if len(states) > 1 else str(engine["engine"])
                out[key] = float(engine["busy_engine_s"])
        return out

    async def sim_state(self, base: str | None = None) -> dict[str, Any] | None:
        """The simulator's engine clock; None on a real vLLM (no such route)."""
        url = (base or self.metrics_urls[0]) + "/sim/state"
        try:
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
                if resp.status != 200:
                    return None
                data: dict[str, Any] = await resp.json()
                return data
        except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError):
            return None

    async def describe(self) -> dict[str, Any]:
        """What the result records about the endpoint: the served models and their max_model_len, the
        version, the engine's CacheConfig (`vllm:cache_config_info`) and which clock figures are in."""
        models = await self._json("/v1/models")
        try:
            version = (await self._json("/version")).get("version")
        except (aiohttp.ClientError, TimeoutError, AttributeError):
            version = None
        snap = await self.snapshot()
        state = await self.sim_state()
        clock = Clock("aissim", float(state["time_scale"])) if state and "time_scale" in state else Clock("wall")
        data = models.get("data") or []
        return {
            "url": self.base,
            "models": [d.get("id") for d in data],
            "max_model_len": data[0].get("max_model_len") if data else None,
            "root": data[0].get("root") if data else None,
            "version": version,
            "cache_config": m.cache_config(snap),
            "clock": clock.kind,
            "time_scale": clock.scale,
        }

    async def complete(
        self,
        *,
        model: str,
        text: str,
        max_tokens: int,
        index: int,
        kind: str,
        requested: int,
        trace: bool = False,
        opened: asyncio.Event | None = None,
    ) -> RequestRecord:
        """One streamed completion; with `trace`, every content chunk's arrival time is kept (the mixed
        workload's long request, whose progress the timeline plot draws); `opened` is set when the response
        headers arrive (or the request fails)."""
        try:
            return await self._complete(model, text, max_tokens, index, kind, requested, trace, opened)
        finally:
            if opened is not None:
                opened.set()

    async def _complete(
        self,
        model: str,
        text: str,
        max_tokens: int,
        index: int,
        kind: str,
        requested: int,
        trace: bool,
        opened: asyncio.Event | None,
    ) -> RequestRecord:
        """complete() without the guarantee that `opened` is set."""
        body = {
            "model": model,
            "prompt": text,
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        record = functools.partial(
            RequestRecord, index=index, kind=kind, prompt_tokens_requested=requested, max_tokens=max_tokens
        )
        t0 = time.monotonic()
        record = functools.partial(record, sent_at=t0)
        chunks: list[float] = []
        first: float | None = None
        last: float | None = None
        gap = 0.0
        usage: dict[str, Any] | None = None
        response_id: str | None = None
        try:
            async with self.session.post(self.base + "/v1/completions", json=body, timeout=self.timeout) as resp:
                if opened is not None:
                    opened.set()  # the stream's headers: the engine has the request (aissim: queued)
                if resp.status != 200:
                    detail = (await resp.text())[:300]
                    return record(ok=False, error=f"HTTP {resp.status}: {detail}")
                async for raw in resp.content:
                    line = raw.decode().strip()
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    chunk = json.loads(payload)
                    response_id = response_id or chunk.get("id")
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    if any(c.get("text") for c in chunk.get("choices") or []):
                        now = time.monotonic()
                        if trace:
                            chunks.append(now)
                        if first is None:
                            first = now
                        elif last is not None:
                            gap = max(gap, now - last)
                        last = now
        except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            # On our timeout the session closes the connection: vLLM aborts the request (async_llm.py:591-593).
            return record(
                ok=False,
                error=f"{type(exc).__name__}: {exc}",
                latency_s=time.monotonic() - t0,
                aborted=isinstance(exc, TimeoutError),
            )
        end = time.monotonic()
        if usage is None:
            return record(ok=False, error="the stream ended without usage", latency_s=end - t0)
        details = usage.get("prompt_tokens_details") or {}
        return record(
            ok=True,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            cached_tokens=details.get("cached_tokens"),
            ttft_s=None if first is None else first - t0,
            latency_s=end - t0,
            decode_s=None if first is None or last is None else last - first,
            max_gap_s=gap,
            chunk_times=tuple(chunks),
            response_id=response_id,
        )

    async def request_times(self, base: str, ids: Sequence[str]) -> dict[str, Any]:
        """aissim only: these requests' times on the engine clock (GET /sim/requests), {} elsewhere."""
        out: dict[str, Any] = {}
        for start in range(0, len(ids), 50):
            query = [("id", i) for i in ids[start : start + 50]]
            try:
                async with self.session.get(
                    base + "/sim/requests", params=query, timeout=aiohttp.ClientTimeout(total=30)
                ) as resp:
                    if resp.status != 200:
                        return {}
                    data = await resp.json()
            except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError):
                return {}
            out.update({k: v for k, v in (data.get("requests") or {}).items() if v})
        return out
