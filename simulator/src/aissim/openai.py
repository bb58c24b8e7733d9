"""OpenAI-compatible request parsing and response bodies, as vLLM's frontend shapes them.

Why this module exists: clients (benchmarks, the operator's generation canary, users trying the demo) talk
to the simulator exactly as to `vllm serve`: /v1/completions and /v1/chat/completions, streaming or not,
`max_tokens`, `ignore_eos`, `stream_options.include_usage`, usage with `prompt_tokens_details` when
`--enable-prompt-tokens-details` is on, and vLLM's error bodies for an unknown model or an over-long
prompt. Everything here is pure: JSON in, dataclasses and JSON-able dicts out.

Sim extension: `"sim_prompt_tokens": N` makes the prompt N tokens long without sending them (see tokens).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aissim import tokens
from aissim.args import SimConfig


class ApiError(Exception):
    """An error vLLM would answer with this status and message."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.err_type, "param": None, "code": self.status}}


@dataclass(frozen=True)
class GenerationRequest:
    """A parsed completion or chat request."""

    chat: bool
    model: str
    prompt: tokens.PromptTokens
    max_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    n: int


def _int_field(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key} must be an integer")
    return value


def _prompt(body: dict[str, Any], *, chat: bool, block_size: int) -> tokens.PromptTokens:
    synthetic = _int_field(body, "sim_prompt_tokens")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        text, overhead = tokens.chat_text(messages)
        if synthetic is None:
            ids = tokens.text_token_ids(text)
            return tokens.from_token_ids([*range(overhead), *ids], block_size=block_size)
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], (str, list)):
            raw = raw[0]
        if isinstance(raw, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
            if synthetic is None:
                if not raw:
                    raise ApiError(400, "prompt must not be empty")
                return tokens.from_token_ids(raw, block_size=block_size)
            text = ",".join(str(t) for t in raw[:64])
        elif isinstance(raw, str):
            text = raw
            if synthetic is None:
                if not raw:
                    raise ApiError(400, "prompt must not be empty")
                return tokens.from_text(raw, block_size=block_size)
        else:
            raise ApiError(400, "prompt must be a string or a list of token ids (batched prompts: send one)")
    if synthetic is None or synthetic <= 0:
        raise ApiError(400, "sim_prompt_tokens must be a positive integer")
    return tokens.synthetic(text=text, num_tokens=synthetic, block_size=block_size)


def parse_request(body: Any, *, chat: bool, cfg: SimConfig) -> GenerationRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = body.get("model") or cfg.served_model_name
    if model not in cfg.served_model_names:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError")
    prompt = _prompt(body, chat=chat, block_size=cfg.block_size)
    n = _int_field(body, "n") or 1
    if n != 1:
        raise ApiError(400, "the simulator serves n=1 only")
    room = cfg.max_model_len - prompt.num_tokens
    max_tokens = _int_field(body, "max_completion_tokens") if chat else None
    max_tokens = max_tokens if max_tokens is not None else _int_field(body, "max_tokens")
    if room <= 0 or (max_tokens is not None and max_tokens > room):
        raise ApiError(
            400,
            f"This model's maximum context length is {cfg.max_model_len} tokens. However, you requested "
            f"{prompt.num_tokens + (max_tokens or 0)} tokens ({prompt.num_tokens} in the messages, "
            f"{max_tokens or 0} in the completion). Please reduce the length of the messages or completion.",
        )
    if max_tokens is not None and max_tokens < 1:
        raise ApiError(400, "max_tokens must be at least 1")
    stream_options = body.get("stream_options") or {}
    return GenerationRequest(
        chat=chat,
        model=model,
        prompt=prompt,
        max_tokens=max_tokens if max_tokens is not None else room,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        n=n,
    )


def usage(*, prompt_tokens: int, completion_tokens: int, cached: int, details: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached} if details else None,
    }
    return out


def response_body(
    *, req: GenerationRequest, rid: str, text: str, finish_reason: str, usage_body: dict[str, Any]
) -> dict[str, Any]:
    created = int(time.time())
    if req.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "chat.completion"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "text_completion"
    return {
        "id": ("chatcmpl-" if req.chat else "cmpl-") + rid,
        "object": obj,
        "created": created,
        "model": req.model,
        "choices": [choice],
        "usage": usage_body,
    }


def chunk_body(
    *, req: GenerationRequest, rid: str, text: str | None, finish_reason: str | None, first: bool = False
) -> dict[str, Any]:
    if req.chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
        if text is not None:
            delta["content"] = text
        choices: Sequence[dict[str, Any]] = [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        ]
        obj = "chat.completion.chunk"
    else:
        choices = [{"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}]
        obj = "text_completion"
    return {
        "id": ("chatcmpl-" if req.chat else "cmpl-") + rid,
        "object": obj,
        "created": int(time.time()),
        "model": req.model,
        "choices": list(choices),
    }


def usage_chunk(*, req: GenerationRequest, rid: str, usage_body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": ("chatcmpl-" if req.chat else "cmpl-") + rid,
        "object": "chat.completion.chunk" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [],
        "usage": usage_body,
    }


def models_body(cfg: SimConfig, *, created: int) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": cfg.model,
                "parent": None,
                "max_model_len": cfg.max_model_len,
                "permission": [],
            }
            for name in cfg.served_model_names
        ],
    }
