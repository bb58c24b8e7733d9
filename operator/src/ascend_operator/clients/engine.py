"""HTTP calls to the engines: /metrics, /v1/models and the generation canary.

Every call has its own timeout, and `scrape_all` runs them concurrently, so one slow or hung pod never
delays the judgement of another. A failed call is a result (`None` or a failed canary), never an
exception that could end the health loop.

With an API key, /v1 calls carry `Authorization: Bearer <key>` (vLLM guards /v1, /v2 and /inference:
vllm/entrypoints/serve/utils/server_utils.py:42, :90); /metrics never does, as vLLM serves it open. Errors
are reported by type name or HTTP status only, so a key never reaches a log line or an event.
"""

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp


@dataclass(frozen=True, kw_only=True)
class CanaryResult:
    """One canary: did tokens come back within the timeout?"""

    ok: bool
    seconds: float
    tokens: int
    error: str = ""
    status: int | None = None
    """HTTP status, None when no answer came (401: the key was refused)."""


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header vLLM checks, or none."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


#: Scrapes and /v1/models checks in flight at once, across every service (each takes milliseconds).
MAX_SCRAPES = 32
#: Canaries in flight at once: a canary may wait its whole timeout behind a busy engine's batch, so the
#: bound is high; it only keeps a fleet-wide stall from opening thousands of sockets.
MAX_CANARIES = 256


class Engines(Protocol):
    """What the health loop asks of engines (`EngineClient`; tests script it)."""

    async def get_text(self, url: str, *, timeout: float) -> str | None:
        """A GET's body, None on any failure."""
        ...

    async def get_json(self, url: str, *, timeout: float, api_key: str | None = None) -> Mapping[str, Any] | None:
        """A GET's JSON object, None on any failure."""
        ...

    async def canary(
        self, base: str, *, model: str, prompt: str, max_tokens: int, timeout: float, api_key: str | None = None
    ) -> CanaryResult:
        """One generation through the engine's OpenAI API."""
        ...


class EngineClient:
    """A shared aiohttp session for all engines. Concurrency is bounded here, and a call's timeout starts
    once it holds its slot, so waiting for a slot never counts against an engine."""

    def __init__(
        self, session: aiohttp.ClientSession, *, max_scrapes: int = MAX_SCRAPES, max_canaries: int = MAX_CANARIES
    ) -> None:
        self._session = session
        self._scrapes = asyncio.Semaphore(max_scrapes)
        self._canaries = asyncio.Semaphore(max_canaries)

    async def close(self) -> None:
        """Close the shared session."""
        await self._session.close()

    async def get_text(self, url: str, *, timeout: float) -> str | None:
        """GET a text body (e.g. /metrics); None on any failure."""
        async with self._scrapes:
            return await self._get_text(url, timeout=timeout)

    async def _get_text(self, url: str, *, timeout: float) -> str | None:
        try:
            async with self._session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                return await resp.text() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def get_json(self, url: str, *, timeout: float, api_key: str | None = None) -> Mapping[str, Any] | None:
        """GET a JSON object (e.g. /v1/models); None on any failure."""
        async with self._scrapes:
            return await self._get_json(url, timeout=timeout, api_key=api_key)

    async def _get_json(self, url: str, *, timeout: float, api_key: str | None) -> Mapping[str, Any] | None:
        try:
            async with self._session.get(
                url, timeout=aiohttp.ClientTimeout(total=timeout), headers=auth_headers(api_key)
            ) as resp:
                body = await resp.json() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        return body if isinstance(body, Mapping) else None

    async def canary(
        self, base: str, *, model: str, prompt: str, max_tokens: int, timeout: float, api_key: str | None = None
    ) -> CanaryResult:
        """A few prompt tokens in, `max_tokens` out (ignore_eos, temperature 0): only a real forward counts."""
        async with self._canaries:
            return await self._canary(
                base, model=model, prompt=prompt, max_tokens=max_tokens, timeout=timeout, api_key=api_key
            )

    async def _canary(
        self, base: str, *, model: str, prompt: str, max_tokens: int, timeout: float, api_key: str | None
    ) -> CanaryResult:
        body = {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream": False,
        }
        start = time.monotonic()
        try:
            async with self._session.post(
                f"{base}/v1/completions",
                json=body,
                timeout=aiohttp.ClientTimeout(total=timeout),
                headers=auth_headers(api_key),
            ) as resp:
                payload = await resp.json() if resp.status == 200 else {}
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return CanaryResult(
                ok=False, seconds=time.monotonic() - start, tokens=0, error=type(exc).__name__ or "error"
            )
        tokens = int(((payload or {}).get("usage") or {}).get("completion_tokens") or 0)
        ok = status == 200 and tokens >= 1
        error = "" if ok else f"HTTP {status}, {tokens} tokens"
        return CanaryResult(ok=ok, seconds=time.monotonic() - start, tokens=tokens, error=error, status=status)


async def scrape_all(client: EngineClient, urls: Sequence[str], *, timeout: float) -> list[str | None]:
    """Scrape every URL concurrently, each with its own timeout."""
    return list(await asyncio.gather(*(client.get_text(url, timeout=timeout) for url in urls)))
