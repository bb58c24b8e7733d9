"""Response bodies carry vLLM 0.25.1's fields, nesting and nulls, and nothing the simulator alone knows.

Reference: vllm/entrypoints/openai/chat_completion/{protocol,serving}.py and completion/{protocol,serving}.py;
non-streamed bodies are model_dump(), stream chunks model_dump_json(exclude_unset=True), the usage chunk
exclude_none=True.
"""

from __future__ import annotations

import json
from typing import Any

from tests.sim.conftest import MODEL, Sim, SimFactory, base_args

CHAT_TOP = {"id", "object", "created", "model", "choices", "service_tier", "system_fingerprint", "usage",
            "prompt_logprobs", "prompt_token_ids", "prompt_text", "kv_transfer_params", "metrics"}  # fmt: skip
CHAT_CHOICE = {"index", "message", "logprobs", "finish_reason", "stop_reason", "token_ids", "routed_experts"}
# ChatMessage: an empty tool_calls is dropped, reasoning is `reasoning` (chat_completion/protocol.py:58-74).
CHAT_MESSAGE = {"role", "content", "refusal", "annotations", "audio", "function_call", "reasoning"}
COMPLETION_TOP = {"id", "object", "created", "model", "choices", "service_tier", "system_fingerprint", "usage",
                  "kv_transfer_params", "metrics"}  # fmt: skip
COMPLETION_CHOICE = {"index", "text", "logprobs", "finish_reason", "stop_reason", "token_ids", "prompt_logprobs",
                     "prompt_token_ids", "routed_experts"}  # fmt: skip


async def _stream(s: Sim, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    lines = []
    async with s.session.post(s.base + path, json=body) as resp:
        assert resp.status == 200
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("data: "):
                lines.append(line[6:])
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


async def test_non_streamed_bodies_have_vllms_fields(sim: SimFactory) -> None:
    s = await sim(base_args("--enable-expert-parallel", "--enable-prompt-tokens-details"))
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "ignore_eos": True}
    async with s.session.post(s.base + "/v1/chat/completions", json=chat) as resp:
        body = await resp.json()
    assert set(body) == CHAT_TOP
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    (choice,) = body["choices"]
    assert set(choice) == CHAT_CHOICE
    assert choice["stop_reason"] is None
    assert set(choice["message"]) == CHAT_MESSAGE
    assert choice["message"]["reasoning"] is None
    assert choice["message"]["role"] == "assistant"
    # fingerprint: vllm-<version>-tp8-ep-<hash8> (vllm/entrypoints/serve/utils/fingerprint.py:65-84)
    version, tp, ep, digest = body["system_fingerprint"].rsplit("-", 3)
    assert (version, tp, ep, len(digest)) == ("vllm-0.25.1", "tp8", "ep", 8)
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 0, "multimodal_tokens": None}
    status, completion = await s.complete(max_tokens=3)
    assert status == 200
    assert set(completion) == COMPLETION_TOP
    assert set(completion["choices"][0]) == COMPLETION_CHOICE  # type: ignore[index]
    # The response names the served model and the id comes from X-Request-Id when sent.
    async with s.session.post(
        s.base + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, headers={"X-Request-Id": "abc"}
    ) as resp:
        named = await resp.json()
    assert (named["id"], named["model"]) == ("cmpl-abc", MODEL)


async def test_chat_stream_chunks_are_shaped_as_vllm_sends_them(sim: SimFactory) -> None:
    s = await sim(base_args("--enable-prompt-tokens-details"))
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    events = await _stream(s, "/v1/chat/completions", body)
    first, *middle, last, usage = events
    assert first["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    # the first chunk sets both prompt fields explicitly, so exclude_unset keeps their nulls
    # (chat_completion/serving.py:486-515); no later chunk has them
    assert set(first) == {"id", "object", "created", "model", "choices", "prompt_token_ids", "prompt_text"}
    assert (first["prompt_token_ids"], first["prompt_text"]) == (None, None)
    for event in middle:
        assert set(event) == {"id", "object", "created", "model", "choices"}
        assert set(event["choices"][0]) == {"index", "delta", "logprobs", "finish_reason", "token_ids"}
        assert set(event["choices"][0]["delta"]) == {"content"}
    (end,) = last["choices"]
    assert (end["finish_reason"], end["stop_reason"]) == ("length", None)  # the finishing chunk: stop_reason
    assert "system_fingerprint" not in last  # the usage chunk carries it instead
    assert set(usage) == {"id", "object", "created", "model", "choices", "usage", "system_fingerprint"}
    assert usage["choices"] == []
    assert usage["object"] == "chat.completion.chunk"
    counts = usage["usage"]
    assert counts == {"prompt_tokens": counts["prompt_tokens"], "total_tokens": counts["prompt_tokens"] + 12,
                      "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 0}}  # fmt: skip
    assert len({e["id"] for e in events}) == 1
    assert len({e["created"] for e in events}) == 1


async def test_completion_stream_without_usage_ends_with_the_fingerprint(sim: SimFactory) -> None:
    s = await sim(base_args())
    events = await _stream(s, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 6, "stream": True,
                                                 "ignore_eos": True})  # fmt: skip
    for event in events:
        assert set(event["choices"][0]) == {
            "index", "text", "logprobs", "finish_reason", "stop_reason", "prompt_token_ids", "token_ids"
        }  # fmt: skip
        assert "usage" not in event
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["system_fingerprint"].startswith("vllm-0.25.1-tp8-")
    assert all("system_fingerprint" not in e for e in events[:-1])
