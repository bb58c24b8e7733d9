"""HTTP surface of the simulator: vLLM's OpenAI-compatible routes, /metrics, and the /sim fault API.

Why this module exists: everything the operator and its tests observe goes through HTTP, so the routes,
status codes and bodies follow `vllm serve` (GET /health -> 200 empty body, /v1/models with max_model_len,
/version, /metrics in Prometheus text). Generation is delegated to the engine; a client that goes away
aborts its request, as in vLLM. The /sim routes are simulator-only:

- GET /sim/faults lists active faults; POST /sim/faults sets one from a JSON body such as
  {"fault": "stall-at-kv", "threshold": 0.975}, {"fault": "hang"}, {"fault": "drift", "fraction": 0.18,
  "period_s": 600}, {"fault": "crash", "exit_code": 3, "after_s": 0}; DELETE /sim/faults clears all
  (or one with ?fault=NAME). slow-start and drop-args act before the engine exists and are refused with
  409 here; use --sim-load-seconds / --sim-drop-args.
- With an API key (`--api-key` or VLLM_API_KEY), requests under /v1, /v2 and /inference without a matching
  `Authorization: Bearer <key>` get 401 {"error": "Unauthorized"}, OPTIONS excepted; /health, /metrics,
  /version and /sim stay open (vllm/entrypoints/serve/utils/server_utils.py:42-93).
- POST /v1/completions/render, /v1/chat/completions/render and /tokenize answer as vLLM's do, with the
  simulator's own token ids (aissim/render.py): vllm-router's cache_aware policy routes on them.
- With `--kv-transfer-config` the engine is a prefill or decode engine: requests carry `kv_transfer_params`
  and responses answer with them, as vllm-ascend's Mooncake connector does (aissim/kvtransfer.py); a request
  whose KV could not be pulled gets vLLM's 500 "Internal server error".
- GET /sim/requests?id=<response id>...: those recent requests' times on the engine clock (arrival, first
  and last token, output by step), so a bench on a loaded host reads exact latencies, not its own lag.
- GET /sim/state: engine clock, per-engine running / waiting / KV / step count, faults, and the effective
  config (known flags, flags dropped).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from aissim import openai, render, tokens
from aissim.calibration import VLLM_VERSION
from aissim.engine import SimEngine
from aissim.faults import Fault, FaultError, parse_fault_json

log = logging.getLogger("aissim")

ExitFn = Callable[[int], None]


def schedule_crash(engine: SimEngine, fault: Fault, exit_fn: ExitFn) -> None:
    """Exit the process after `after_s` engine seconds, like an engine core dying under the server."""
    code = int(fault.params["exit_code"])

    def crash() -> None:
        log.error("EngineCore encountered a fatal error (sim crash fault); exiting with %d", code)
        for handler in logging.getLogger().handlers:
            handler.flush()
        exit_fn(code)

    asyncio.get_running_loop().call_later(fault.params["after_s"] / engine.clock.scale, crash)


def _json(data: Any, status: int = 200) -> web.Response:
    """A JSON body as starlette's JSONResponse writes it: compact separators, UTF-8, `application/json`."""
    return web.Response(body=_dumps(data), status=status, content_type="application/json")


def _dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


#: The path prefixes vLLM's AuthenticationMiddleware guards (vllm/entrypoints/serve/utils/server_utils.py:42).
GUARDED_PREFIX = ("/v1", "/v2", "/inference")


def bearer_ok(header: str | None, tokens: tuple[str, ...]) -> bool:
    """vLLM's check: scheme `bearer` (any case), the rest compared by digest in constant time."""
    scheme, _, param = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    digest = hashlib.sha256(param.encode()).digest()
    return any(hmac.compare_digest(digest, hashlib.sha256(t.encode()).digest()) for t in tokens)


def auth_middleware(tokens: tuple[str, ...]) -> Any:
    """401 on guarded paths without a matching bearer token."""

    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        guarded = request.method != "OPTIONS" and request.path.startswith(GUARDED_PREFIX)
        if guarded and not bearer_ok(request.headers.get("Authorization"), tokens):
            return _json({"error": "Unauthorized"}, 401)
        response: web.StreamResponse = await handler(request)
        return response

    return check


#: How often a request held by the `unreachable` fault looks whether the link is back.
UNREACHABLE_POLL_SECONDS = 0.2


def unreachable_middleware(engine: SimEngine) -> Any:
    """The `unreachable` fault (aissim/faults.py): a request but /sim/* gets no answer while it is set, as
    across a dead link (the client times out); once cleared, held requests go on."""

    @web.middleware
    async def held(request: web.Request, handler: Any) -> Any:
        # the fault state is set and cleared by plain calls (/sim/faults), not an event to wait on
        while engine.faults.unreachable and not request.path.startswith("/sim/"):  # noqa: ASYNC110
            await asyncio.sleep(UNREACHABLE_POLL_SECONDS)
        return await handler(request)

    return held


def build_app(engine: SimEngine, *, exit_fn: ExitFn = os._exit) -> web.Application:
    cfg = engine.cfg
    fingerprint = openai.system_fingerprint(cfg)
    # vLLM's uvicorn server has no request-body limit; aiohttp's default (1 MiB) would refuse a 256K-token
    # text prompt (~1 MB), which `aisctl bench prefill` / `mixed` send as real text.
    app = web.Application(
        client_max_size=64 * 1024 * 1024,
        middlewares=[unreachable_middleware(engine), *([auth_middleware(cfg.api_keys)] if cfg.api_keys else [])],
    )

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(_: web.Request) -> web.Response:
        return _json({"version": VLLM_VERSION})

    async def models(_: web.Request) -> web.Response:
        return _json(openai.models_body(cfg))

    async def metrics(_: web.Request) -> web.Response:
        body = engine.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def generate(request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _json(openai.ApiError(400, "request body is not valid JSON").body(), 400)
        try:
            gen = openai.parse_request(body, chat=chat, cfg=cfg, request_id=request.headers.get("X-Request-Id"))
        except openai.ApiError as err:
            return _json(err.body(), err.status)
        core, delivery = engine.submit(
            prompt=gen.prompt,
            max_tokens=gen.max_tokens,
            ignore_eos=gen.ignore_eos,
            kv_transfer_params=gen.kv_transfer_params,
            response_id=gen.request_id,
        )
        req = delivery.req
        seed = gen.prompt.seed

        def usage_body() -> dict[str, Any]:
            return openai.usage(
                prompt_tokens=gen.prompt.num_tokens,
                completion_tokens=req.output_tokens,
                cached=req.num_cached_tokens,
                details=cfg.enable_prompt_tokens_details,
            )

        try:
            if not gen.stream:
                produced = 0
                done = False
                while not done:
                    new, done = await delivery.next()
                    produced += new
                if req.finish_reason == "error":
                    return _json(openai.GENERATION_ERROR.body(), openai.GENERATION_ERROR.status)
                text = tokens.output_text(seed=seed, start=0, count=produced)
                if gen.chat:
                    engine.tool_parser.on_response(gen.tool_use)
                return _json(
                    openai.response_body(
                        req=gen,
                        text=text,
                        finish_reason=req.finish_reason or "stop",
                        usage_body=usage_body(),
                        fingerprint=fingerprint,
                        kv_transfer_params=req.kv_params,
                    )
                )
            # Starlette's StreamingResponse sends the headers at once, then a chunk per engine output; the chat
            # role chunk goes out with the first output, not before (chat_completion/serving.py:478-525).
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
            await resp.prepare(request)
            shaper = openai.StreamShaper(req=gen, fingerprint=fingerprint)

            async def send(data: dict[str, Any]) -> None:
                await resp.write(b"data: " + _dumps(data) + b"\n\n")

            produced = 0
            done = False
            while not done:
                new, done = await delivery.next()
                if req.finish_reason == "error":  # completion/serving.py:491-497: an error event, then [DONE]
                    await send(openai.GENERATION_ERROR.body())
                    break
                if produced == 0 and gen.chat:
                    await send(shaper.role_chunk())
                text = tokens.output_text(seed=seed, start=produced, count=new)
                if gen.chat and new:
                    engine.tool_parser.on_delta(gen.tool_use)
                produced += new
                reason = (req.finish_reason or "stop") if done else None
                await send(shaper.token_chunk(text=text, finish_reason=reason))
            if gen.include_usage and req.finish_reason != "error":
                await send(shaper.usage_chunk(usage_body()))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp
        finally:
            if not req.finished:
                core.abort(req)

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, chat=False)

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, chat=True)

    async def rendered(request: web.Request, *, chat: bool | None) -> web.Response:
        """The render routes (chat True/False) and /tokenize (None): aissim/render.py."""
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _json(openai.ApiError(400, "request body is not valid JSON").body(), 400)
        try:
            out = render.tokenize_body(body, cfg=cfg) if chat is None else render.render_body(body, chat=chat, cfg=cfg)
        except openai.ApiError as err:
            return _json(err.body(), err.status)
        return _json(out)

    async def faults_get(_: web.Request) -> web.Response:
        return _json({"faults": engine.faults.describe()})

    async def faults_post(request: web.Request) -> web.Response:
        try:
            fault = parse_fault_json(await request.json(), now=engine.clock.now())
        except json.JSONDecodeError:
            return _json({"error": "body is not valid JSON"}, 400)
        except FaultError as err:
            status = 409 if "acts before the engine exists" in str(err) else 400
            return _json({"error": str(err)}, status)
        engine.faults.set(fault)
        log.warning("sim fault set: %s", fault.describe())
        if fault.name == "crash":
            schedule_crash(engine, fault, exit_fn)
        engine.wake_all()
        return _json({"faults": engine.faults.describe()})

    async def faults_delete(request: web.Request) -> web.Response:
        cleared = engine.faults.clear(request.query.get("fault"))
        engine.wake_all()
        return _json({"cleared": cleared, "faults": engine.faults.describe()})

    async def requests_get(request: web.Request) -> web.Response:
        ids = request.query.getall("id", [])
        return _json({"requests": {i: engine.request_times(i) for i in ids}})

    async def state(_: web.Request) -> web.Response:
        return _json(
            {
                **engine.state(),
                "config": {
                    "known": dict(cfg.known),
                    "dropped": list(cfg.dropped),
                    "speculative_config": cfg.speculative_config,
                    "compilation_config": cfg.compilation_config,
                    "additional_config": cfg.additional_config,
                    "acceptance_profile": cfg.sim.acceptance_profile,
                },
            }
        )

    app.router.add_get("/health", health)
    app.router.add_get("/ping", health)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/completions/render", functools.partial(rendered, chat=False))
    app.router.add_post("/v1/chat/completions/render", functools.partial(rendered, chat=True))
    app.router.add_post("/tokenize", functools.partial(rendered, chat=None))
    app.router.add_get("/sim/faults", faults_get)
    app.router.add_post("/sim/faults", faults_post)
    app.router.add_delete("/sim/faults", faults_delete)
    app.router.add_get("/sim/state", state)
    app.router.add_get("/sim/requests", requests_get)
    return app
