"""The render and tokenize routes a router asks before routing (aissim/render.py).

What a user notices: behind vllm-router's cache_aware policy, requests sharing a prompt prefix go to the
engine that holds it only when the engine renders prompts to token ids; here the ids agree with what the
engine itself counts, equal prefixes give equal leading ids, and a body the generation route refuses is
refused the same way.
"""

from __future__ import annotations

from typing import Any

from tests.sim.conftest import MODEL, SimFactory, base_args


async def post(s: Any, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with s.session.post(s.base + path, json=body) as resp:
        return resp.status, await resp.json()


async def test_rendered_ids_are_the_engines_own_and_share_a_shared_prefix(sim: SimFactory) -> None:
    s = await sim(base_args())
    shared = "a long system prompt the requests share " * 20
    status, first = await post(s, "/v1/completions/render", {"model": MODEL, "prompt": shared + "question one"})
    assert status == 200
    _, second = await post(s, "/v1/completions/render", {"model": MODEL, "prompt": shared + "and question two"})
    a, b = first[0]["token_ids"], second[0]["token_ids"]
    common = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert common == len(shared) // 4  # every token of the shared text, at ~4 characters per token
    _, done = await s.complete(prompt=shared + "question one", max_tokens=1)
    assert len(a) == done["usage"]["prompt_tokens"]  # type: ignore[index]
    chat = {"model": MODEL, "messages": [{"role": "user", "content": shared}]}
    status, rendered = await post(s, "/v1/chat/completions/render", chat)
    assert status == 200
    _, answered = await post(s, "/v1/chat/completions", {**chat, "max_tokens": 1})
    assert len(rendered["token_ids"]) == answered["usage"]["prompt_tokens"]


async def test_tokenize_counts_as_the_engine_does_and_synthetic_prompts_keep_their_length(sim: SimFactory) -> None:
    s = await sim(base_args())
    status, body = await post(s, "/tokenize", {"model": MODEL, "prompt": "x" * 400})
    assert status == 200
    assert (body["count"], len(body["tokens"]), body["max_model_len"]) == (100, 100, 327680)
    _, long = await post(s, "/v1/completions/render", {"model": MODEL, "prompt": "doc", "sim_prompt_tokens": 5000})
    _, again = await post(s, "/v1/completions/render", {"model": MODEL, "prompt": "doc", "sim_prompt_tokens": 5000})
    _, other = await post(s, "/v1/completions/render", {"model": MODEL, "prompt": "odc", "sim_prompt_tokens": 5000})
    assert len(long[0]["token_ids"]) == 5000
    assert long[0]["token_ids"] == again[0]["token_ids"]
    assert long[0]["token_ids"][0] != other[0]["token_ids"][0]


async def test_render_refuses_what_generation_refuses(sim: SimFactory) -> None:
    s = await sim(base_args())
    status, body = await post(s, "/v1/completions/render", {"model": "nope", "prompt": "hi"})
    assert status == 404
    assert body["error"]["message"] == "The model `nope` does not exist."
    status, body = await post(s, "/tokenize", {"model": "nope", "prompt": "hi"})
    assert status == 404
    status, body = await post(s, "/v1/completions/render", {"model": MODEL, "prompt": "hi", "max_tokens": 10**7})
    assert status == 400
