"""The prompt-rendering routes a router asks before it routes: `/v1/completions/render`,
`/v1/chat/completions/render` and `/tokenize`.

Why this module exists: vllm-router 0.1.17's cache-aware policy routes on the prompt's token ids, and for an
HTTP engine it gets them from the engine: POST `<route>/render` first, `/tokenize` when that route is absent
(vllm-router src/backend/preprocess.rs:102-150, 178-260). Without ids it logs `missing_tokens` and sends the
request to the least loaded engine (src/policies/cache_aware.rs:354-359), so against an engine that served
neither route "cache_aware" was load balancing. vLLM 0.25.1 serves both for a generating model
(vllm/entrypoints/openai/api_server.py:216-219 -> scale_out/factories.py:61-67, render/api_router.py:52-77,
render/serving.py:152-210; serve/__init__.py:28-32, serve/tokenize/protocol.py:159-163), and so does the
simulator, with the ids its own tokenizer gives the engine (tokens.py), so equal prefixes render to equal
leading ids exactly where the engine's prefix cache would hit.
"""

from __future__ import annotations

import hashlib
from typing import Any

from aissim import openai, tokens
from aissim.args import SimConfig

#: Ids past the text's own stand in for a `sim_prompt_tokens` prompt; drawn from the same range as text ids.
_VOCAB = 129_280


def _synthetic_ids(text: str, count: int) -> list[int]:
    """`count` ids keyed by `text` (same text and count, same ids), for a prompt the client did not send."""
    seed = hashlib.blake2b(text.encode(), digest_size=8).digest()
    out: list[int] = []
    block = 0
    while len(out) < count:
        digest = hashlib.blake2b(seed + block.to_bytes(8, "little"), digest_size=64).digest()
        out.extend(int.from_bytes(digest[i : i + 4], "little") % _VOCAB for i in range(0, 64, 4))
        block += 1
    return out[:count]


def prompt_token_ids(body: dict[str, Any], *, chat: bool) -> list[int]:
    """The ids the engine would see for this (already validated) request, as openai._prompt reads it."""
    synthetic = body.get("sim_prompt_tokens")
    if chat:
        text, overhead = tokens.chat_text(body["messages"])
        if synthetic is None:
            return [*range(overhead), *tokens.text_token_ids(text)]
        return _synthetic_ids(text, int(synthetic))
    raw = body.get("prompt")
    if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], (str, list)):
        raw = raw[0]
    if isinstance(raw, list):
        return [int(t) for t in raw] if synthetic is None else _synthetic_ids(",".join(map(str, raw[:64])), synthetic)
    text = str(raw)
    return tokens.text_token_ids(text) if synthetic is None else _synthetic_ids(text, int(synthetic))


def render_body(body: Any, *, chat: bool, cfg: SimConfig) -> Any:
    """What vLLM's render route answers: a GenerateRequest (chat) or a list of them (completions), each with
    the prompt's `token_ids`; raises openai.ApiError as the generation route would for the same body."""
    gen = openai.parse_request(body, chat=chat, cfg=cfg)
    item = {
        "request_id": gen.request_id,
        "token_ids": prompt_token_ids(body, chat=chat),
        "features": None,
        "sampling_params": {"max_tokens": gen.max_tokens},
        "model": body.get("model"),
        "stream": bool(body.get("stream")),
        "stream_options": body.get("stream_options") if body.get("stream") else None,
        "cache_salt": body.get("cache_salt"),
        "priority": body.get("priority", 0),
        "token_offsets": None,
    }
    return item if chat else [item]


def tokenize_body(body: Any, *, cfg: SimConfig) -> dict[str, Any]:
    """vLLM's TokenizeResponse for a `prompt` or `messages` body (serve/tokenize/protocol.py:159-163)."""
    if not isinstance(body, dict):
        raise openai.ApiError(400, "request body must be a JSON object")
    model = body.get("model")
    if model and model not in cfg.served_model_names:
        raise openai.ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", param="model")
    chat = "messages" in body
    if chat and (not isinstance(body["messages"], list) or not body["messages"]):
        raise openai.ApiError(400, "messages must be a non-empty list", param="messages")
    if not chat and not isinstance(body.get("prompt"), (str, list)):
        raise openai.ApiError(400, "prompt must be a string or a list of token ids", param="prompt")
    ids = prompt_token_ids(body, chat=chat)
    return {"count": len(ids), "max_model_len": cfg.max_model_len, "tokens": ids, "token_strs": None}
