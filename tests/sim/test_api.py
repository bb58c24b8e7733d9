"""OpenAI-compatible routes behave as `vllm serve` does for the clients the operator and users run."""

from __future__ import annotations

import asyncio
import json

from prometheus_client.parser import text_string_to_metric_families

from tests.sim.conftest import MODEL, SimFactory, base_args


async def test_models_reports_the_served_name_and_max_model_len(sim: SimFactory) -> None:
    s = await sim(base_args())
    async with s.session.get(s.base + "/v1/models") as resp:
        body = await resp.json()
    assert resp.status == 200
    assert [m["id"] for m in body["data"]] == [MODEL]
    assert body["data"][0]["max_model_len"] == 327680
    assert body["data"][0]["root"] == "/data/models/DeepSeek-V4-Flash-0731-w8a8"
    async with s.session.get(s.base + "/health") as resp:
        assert resp.status == 200
        assert await resp.text() == ""


async def test_completion_honours_max_tokens_and_ignore_eos(sim: SimFactory) -> None:
    s = await sim(base_args())
    status, body = await s.complete(prompt="The quick brown fox " * 10, max_tokens=40, ignore_eos=True)
    assert status == 200
    usage = body["usage"]
    assert isinstance(usage, dict)
    assert usage["completion_tokens"] == 40
    assert usage["prompt_tokens"] == 50  # 200 characters at ~4 characters per token
    choice = body["choices"][0]  # type: ignore[index]
    assert choice["finish_reason"] == "length"
    assert len(choice["text"].split()) == 40
    # Without ignore_eos the "model" stops by itself before a generous max_tokens, the same way each time.
    _, first = await s.complete(prompt="why is the sky blue", max_tokens=5000)
    _, again = await s.complete(prompt="why is the sky blue", max_tokens=5000)
    assert first["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
    assert first["usage"]["completion_tokens"] == again["usage"]["completion_tokens"] < 5000  # type: ignore[index]


async def test_chat_stream_with_usage_and_cached_prompt_details(sim: SimFactory) -> None:
    s = await sim(base_args("--enable-prompt-tokens-details"))
    body = {
        "model": MODEL,
        "messages": [{"role": "system", "content": "x" * 2000}, {"role": "user", "content": "hi"}],
        "max_tokens": 12,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    usages = []
    for _ in range(2):
        chunks = []
        async with s.session.post(s.base + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            async for raw in resp.content:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    chunks.append(line[6:])
        assert chunks[-1] == "[DONE]"
        events = [json.loads(c) for c in chunks[:-1]]
        text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
        assert len(text.split()) == 12
        assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "length"
        usages.append(events[-1]["usage"])
    assert usages[0]["completion_tokens"] == 12
    assert usages[0]["prompt_tokens_details"] == {"cached_tokens": 0}
    # The same 2000-character system prompt again: its full blocks come from the prefix cache.
    assert usages[1]["prompt_tokens_details"]["cached_tokens"] >= 384


async def test_errors_look_like_vllm(sim: SimFactory) -> None:
    s = await sim(base_args())
    status, body = await s.complete(model="not-served")
    assert status == 404  # vllm/entrypoints/serve/engine/serving.py:63-68
    assert body == {
        "error": {"message": "The model `not-served` does not exist.", "type": "NotFoundError", "param": "model",
                  "code": 404}
    }  # fmt: skip
    # A 327,000-token prompt with 1000 output tokens: the renderer's token length check
    # (vllm/renderers/params.py:428-451); the text was tokenised with truncation at max_input + 1.
    status, body = await s.complete(sim_prompt_tokens=327_000, max_tokens=1000)
    assert status == 400
    assert body == {
        "error": {
            "message": "This model's maximum context length is 327680 tokens. However, you requested 1000 output "
            "tokens and your prompt contains at least 326681 input tokens, for a total of at least 327681 tokens. "
            "Please reduce the length of the input prompt or the number of requested output tokens. "
            "(parameter=input_tokens, value=326681)",
            "type": "BadRequestError",
            "param": "input_tokens",
            "code": 400,
        }
    }
    status, body = await s.complete(prompt=list(range(400)), max_tokens=327_500)  # token ids: the exact count
    assert body["error"]["message"].startswith(  # type: ignore[index]
        "This model's maximum context length is 327680 tokens. However, you requested 327500 output tokens "
        "and your prompt contains 400 input tokens, for a total of 327900 tokens."
    )
    status, body = await s.complete(max_tokens=400_000)
    assert (status, body["error"]["param"]) == (400, "max_tokens")  # type: ignore[index]
    assert body["error"]["message"].startswith(  # type: ignore[index]
        "max_tokens=400000 cannot be greater than max_model_len=max_total_tokens=327680."
    )
    status, body = await s.complete(max_tokens=0)
    assert body["error"]["message"] == "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"  # type: ignore[index]


async def test_a_completion_without_max_tokens_stops_at_16(sim: SimFactory) -> None:
    # CompletionRequest.max_tokens defaults to 16 (vllm/entrypoints/openai/completion/protocol.py:61); chat has
    # no default and may run to max_model_len.
    s = await sim(base_args())
    status, body = await s.complete(prompt="tell me everything", ignore_eos=True)
    assert status == 200
    assert body["usage"]["completion_tokens"] == 16  # type: ignore[index]
    assert body["choices"][0]["finish_reason"] == "length"  # type: ignore[index]


async def test_a_huge_prompt_can_be_sent_as_a_token_count(sim: SimFactory) -> None:
    s = await sim(base_args())
    status, body = await s.complete(prompt="seed 1", sim_prompt_tokens=100_000, max_tokens=2, ignore_eos=True)
    assert status == 200
    assert body["usage"]["prompt_tokens"] == 100_000  # type: ignore[index]
    status, body = await s.complete(prompt=list(range(300)), max_tokens=1)
    assert body["usage"]["prompt_tokens"] == 300  # type: ignore[index]


async def test_a_client_that_goes_away_aborts_its_request_without_counting_it(sim: SimFactory) -> None:
    # vLLM drops a disconnected client's request in OutputProcessor.abort_requests without finished-request
    # stats (vllm/v1/engine/output_processor.py:450-507): no request_success{abort}, no e2e observation.
    s = await sim(base_args(scale=1.0))  # real time: 2000 tokens would take ~30 s
    body = {"model": MODEL, "prompt": "long answer", "max_tokens": 2000, "ignore_eos": True, "stream": True}
    async with s.session.post(s.base + "/v1/completions", json=body) as resp:
        await resp.content.readline()  # the stream has started
    for _ in range(100):
        totals = await s.totals()
        if totals["vllm:num_requests_running"] == 0:
            break
        await asyncio.sleep(0.02)
    families = {f.name: f for f in text_string_to_metric_families(await s.metrics_text())}
    success = {
        sample.labels["finished_reason"]: sample.value
        for sample in families["vllm:request_success"].samples
        if sample.name.endswith("_total")
    }
    assert totals["vllm:num_requests_running"] == 0
    assert success == {"stop": 0, "length": 0, "abort": 0, "error": 0, "repetition": 0}
    assert totals["vllm:e2e_request_latency_seconds_count"] == 0
    assert totals["vllm:generation_tokens_total"] > 0  # the tokens it did get were counted as they came
