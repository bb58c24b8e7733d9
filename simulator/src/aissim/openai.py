"""OpenAI-compatible request parsing and response bodies, field for field as vLLM 0.25.1's frontend writes them.

Why this module exists: clients (benchmarks, the operator's generation canary, users trying the demo) talk
to the simulator exactly as to `vllm serve`, so each body has the fields, nesting and nulls vLLM's pydantic
models serialise to, and nothing the simulator alone knows. Everything here is pure: JSON in, dicts out.

How vLLM serialises (so the shapes below follow):
- non-streamed bodies are `model_dump()` of the response (every field, nulls included), e.g.
  vllm/entrypoints/openai/chat_completion/api_router.py:67-70; ChatMessage drops an empty `tool_calls`
  and names reasoning `reasoning` (chat_completion/protocol.py:58-74, no `reasoning_content`);
- stream chunks are `model_dump_json(exclude_unset=True)`: only the fields the serving code set, so the
  first chat chunk has no `token_ids`/`stop_reason`, later ones `token_ids: null`, and the finishing one
  also `stop_reason` (chat_completion/serving.py:490-525, 685-743); completion chunks set every choice
  field (completion/serving.py:402-440);
- the usage chunk is `exclude_none=True` (chat_completion/serving.py:777-788, completion/serving.py:474-485),
  with `system_fingerprint`; without include_usage the finishing chunk carries the fingerprint instead;
- errors are ErrorResponse{error: ErrorInfo{message, type, param, code}} (openai/engine/protocol.py:60-68),
  with a VLLMValidationError's str() (message + " (parameter=..., value=...)", vllm/exceptions.py:29-36).
- `system_fingerprint` is `vllm-<version>[-tpN][-ppN][-dpN][-ep]-<hash8>` (serve/utils/fingerprint.py:48-84);
  the simulator's hash8 is a digest of its own argv, not vllm_config.compute_hash().

Sim extension: `"sim_prompt_tokens": N` makes the prompt N tokens long without sending them (see tokens).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

from aissim import tokens
from aissim.args import SimConfig
from aissim.calibration import VLLM_VERSION
from aissim.parsers import NO_TOOLS, ToolUse, tool_use

#: CompletionRequest.max_tokens defaults to 16 (vllm/entrypoints/openai/completion/protocol.py:61); chat has none.
COMPLETION_DEFAULT_MAX_TOKENS = 16


class ApiError(Exception):
    """An error vLLM would answer with this status, message, type and param."""

    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", *, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.err_type, "param": self.param, "code": self.status}}


def validation_error(message: str, *, param: str, value: object) -> ApiError:
    """A VLLMValidationError as exception_handler answers it (serve/utils/error_response.py:36-39)."""
    return ApiError(400, f"{message} (parameter={param}, value={value})", param=param)


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
    request_id: str
    tool_use: ToolUse = NO_TOOLS
    """A chat's tool_choice and thinking mode, for the tool-call parser's counter (aissim/parsers.py)."""
    kv_transfer_params: dict[str, Any] | None = None
    """The request's `kv_transfer_params` (P/D: aissim/kvtransfer.py); the protocol types it as an object."""


def _int_field(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key} must be an integer", param=key)
    return value


def _prompt(body: dict[str, Any], *, chat: bool, block_size: int) -> tuple[tokens.PromptTokens, bool]:
    """The prompt and whether it came as text (tokenised with truncation) rather than token ids."""
    synthetic = _int_field(body, "sim_prompt_tokens")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list", param="messages")
        text, overhead = tokens.chat_text(messages)
        if synthetic is None:
            ids = tokens.text_token_ids(text)
            return tokens.from_token_ids([*range(overhead), *ids], block_size=block_size), True
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], (str, list)):
            raw = raw[0]
        if isinstance(raw, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in raw):
            if synthetic is None:
                if not raw:  # vllm/v1/engine/input_processor.py:395-396
                    raise ApiError(400, "The decoder prompt cannot be empty")
                return tokens.from_token_ids(raw, block_size=block_size), False
            text = ",".join(str(t) for t in raw[:64])
        elif isinstance(raw, str):
            text = raw
            if synthetic is None:
                if not raw:
                    raise ApiError(400, "The decoder prompt cannot be empty")
                return tokens.from_text(raw, block_size=block_size), True
        else:
            raise ApiError(400, "prompt must be a string or a list of token ids (batched prompts: send one)")
    if synthetic is None or synthetic <= 0:
        raise ApiError(400, "sim_prompt_tokens must be a positive integer", param="sim_prompt_tokens")
    return tokens.synthetic(text=text, num_tokens=synthetic, block_size=block_size), True


def check_length(*, num_prompt: int, max_tokens: int | None, param: str, max_model_len: int, truncated: bool) -> int:
    """vLLM's length checks in their order; returns the max_tokens the engine runs with.

    1. TokenizeParams: max_output > max_model_len (vllm/renderers/params.py:217-229);
    2. the token length check against max_model_len - max_output (params.py:428-451). A text prompt was
       tokenised with truncation to max_input + 1 tokens (params.py:307-316), so its count reads
       "at least max_input + 1";
    3. get_max_tokens clamps to the room left (vllm/entrypoints/serve/utils/api_utils.py:170-206), and
       SamplingParams refuses fewer than one (vllm/sampling_params.py:571-576).
    """
    max_output = max_tokens or 0
    if max_output > max_model_len:
        raise validation_error(
            f"{param}={max_output} cannot be greater than max_model_len=max_total_tokens={max_model_len}. "
            "Please request fewer output tokens.",
            param=param,
            value=max_output,
        )
    max_input = max_model_len - max_output
    if num_prompt > max_input:
        count = min(num_prompt, max_input + 1) if truncated else num_prompt
        qualifier = "at least " if count == max_input + 1 else ""
        raise validation_error(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{max_output} output tokens and your prompt contains {qualifier}{count} input tokens, "
            f"for a total of {qualifier}{count + max_output} tokens. Please reduce the length of the input "
            "prompt or the number of requested output tokens.",
            param="input_tokens",
            value=count,
        )
    room = max_model_len - num_prompt
    final = room if max_tokens is None else min(room, max_tokens)
    if final < 1:
        raise validation_error(f"max_tokens must be at least 1, got {final}.", param="max_tokens", value=final)
    return final


def parse_request(body: Any, *, chat: bool, cfg: SimConfig, request_id: str | None = None) -> GenerationRequest:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = body.get("model")
    if model and model not in cfg.served_model_names:  # vllm/entrypoints/serve/engine/serving.py:40-75
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", param="model")
    prompt, truncated = _prompt(body, chat=chat, block_size=cfg.block_size)
    n = _int_field(body, "n") or 1
    if n != 1:
        raise ApiError(400, "the simulator serves n=1 only", param="n")
    if chat and body.get("max_completion_tokens") is not None:
        max_tokens, param = _int_field(body, "max_completion_tokens"), "max_completion_tokens"
    elif chat:
        max_tokens, param = _int_field(body, "max_tokens"), "max_tokens"
    else:
        max_tokens = _int_field(body, "max_tokens") if "max_tokens" in body else COMPLETION_DEFAULT_MAX_TOKENS
        param = "max_tokens"
    final = check_length(
        num_prompt=prompt.num_tokens,
        max_tokens=max_tokens,
        param=param,
        max_model_len=cfg.max_model_len,
        truncated=truncated,
    )
    stream_options = body.get("stream_options") or {}
    kv_params = body.get("kv_transfer_params")
    if kv_params is not None and not isinstance(kv_params, dict):
        raise ApiError(400, "kv_transfer_params must be an object", param="kv_transfer_params")
    # The response id: X-Request-Id, else the body's request_id, else random_uuid() (16 hex digits);
    # serve/engine/serving.py:117-126, vllm/utils/__init__.py:11-12.
    rid = request_id or body.get("request_id") or f"{secrets.randbits(64):016x}"
    return GenerationRequest(
        chat=chat,
        model=cfg.served_model_name,
        prompt=prompt,
        max_tokens=final,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        n=n,
        request_id=("chatcmpl-" if chat else "cmpl-") + str(rid),
        tool_use=tool_use(body) if chat else NO_TOOLS,
        kv_transfer_params=kv_params,
    )


def system_fingerprint(cfg: SimConfig) -> str:
    """`full` mode (serve/utils/fingerprint.py:65-84): version, non-trivial parallelism, 8 hex of a config hash."""
    parts = [f"vllm-{VLLM_VERSION}"]
    for key, tag in (("tensor_parallel_size", "tp"), ("pipeline_parallel_size", "pp"), ("data_parallel_size", "dp")):
        size = int(cfg.known.get(key) or 1)
        if size > 1:
            parts.append(f"{tag}{size}")
    if cfg.known.get("enable_expert_parallel"):
        parts.append("ep")
    parts.append(hashlib.sha256(repr(sorted(cfg.known.items())).encode()).hexdigest()[:8])
    return "-".join(parts)


def usage(*, prompt_tokens: int, completion_tokens: int, cached: int, details: bool) -> dict[str, Any]:
    """UsageInfo (openai/engine/protocol.py:102-115) as model_dump() writes it."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached, "multimodal_tokens": None} if details else None,
    }


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _drop_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}


def response_body(
    *,
    req: GenerationRequest,
    text: str,
    finish_reason: str,
    usage_body: dict[str, Any],
    fingerprint: str,
    kv_transfer_params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """ChatCompletionResponse / CompletionResponse.model_dump() (chat_completion/protocol.py:95-137,
    completion/protocol.py:520-563): every field, nulls included."""
    if req.chat:
        message = {
            "role": "assistant",
            "content": text,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "reasoning": None,
        }
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
            "token_ids": None,
            "routed_experts": None,
        }
        head: dict[str, Any] = {"id": req.request_id, "object": "chat.completion"}
        tail: dict[str, Any] = {
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "prompt_text": None,
            "kv_transfer_params": kv_transfer_params,
            "metrics": None,
        }
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "routed_experts": None,
        }
        head = {"id": req.request_id, "object": "text_completion"}
        tail = {"kv_transfer_params": kv_transfer_params, "metrics": None}
    return {
        **head,
        "created": int(time.time()),
        "model": req.model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": fingerprint,
        "usage": usage_body,
        **tail,
    }


@dataclass
class StreamShaper:
    """The chunks of one streamed response, in vLLM's order and shapes."""

    req: GenerationRequest
    fingerprint: str
    created: int = 0

    def __post_init__(self) -> None:
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.req.chat else "text_completion"
        return {"id": self.req.request_id, "object": obj, "created": self.created, "model": self.req.model,
                "choices": choices, **extra}  # fmt: skip

    def role_chunk(self) -> dict[str, Any]:
        """Chat only: the first chunk, the role with empty content, and the two prompt fields the serving code
        sets explicitly (so exclude_unset keeps them): `prompt_token_ids` (null without `return_token_ids`)
        and `prompt_text` (null without `return_prompt_text`), chat_completion/serving.py:486-515."""
        delta = {"role": "assistant", "content": ""}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return self._chunk([choice], prompt_token_ids=None, prompt_text=None)

    def token_chunk(self, *, text: str, finish_reason: str | None) -> dict[str, Any]:
        """A chunk of new text; the finishing one carries `stop_reason` (null: EOS or length) and, when no
        usage chunk follows, the fingerprint (chat_completion/serving.py:685-743, completion/serving.py:398-440)."""
        extra: dict[str, Any] = {}
        if finish_reason is not None and not self.req.include_usage:
            extra["system_fingerprint"] = self.fingerprint
        choice: dict[str, Any]
        if self.req.chat:
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish_reason}
            if finish_reason is not None:
                choice["stop_reason"] = None
            choice["token_ids"] = None
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                      "stop_reason": None, "prompt_token_ids": None, "token_ids": None}  # fmt: skip
        return self._chunk([choice], **extra)

    def usage_chunk(self, usage_body: dict[str, Any]) -> dict[str, Any]:
        """The trailing usage chunk, serialised with exclude_none (no null anywhere in it)."""
        return _drop_none(self._chunk([], usage=usage_body, system_fingerprint=self.fingerprint))


#: A request that failed in the engine (finish reason `error`, e.g. its KV could not be pulled): GenerationError
#: (vllm/entrypoints/generate/base/serving.py:170-177) as error_response answers it
#: (vllm/entrypoints/serve/utils/error_response.py:57-60).
GENERATION_ERROR = ApiError(500, "Internal server error", "InternalServerError")


def models_body(cfg: SimConfig) -> dict[str, Any]:
    """ModelList as show_available_models builds it per call (openai/models/serving.py:64-77): a fresh
    `created` and one default ModelPermission (openai/engine/protocol.py:71-94)."""
    now = int(time.time())
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": now,
                "owned_by": "vllm",
                "root": cfg.model,
                "parent": None,
                "max_model_len": cfg.max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{secrets.randbits(64):016x}",
                        "object": "model_permission",
                        "created": now,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in cfg.served_model_names
        ],
    }
