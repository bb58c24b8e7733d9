"""`vllm:tool_call_parser_invocations_total` exists and moves as on vLLM 0.25.1 (aissim/parsers.py).

Reference: vllm/entrypoints/openai/api_server.py:305-310 and vllm/parser/metrics.py (the family, 12 series at
0, no `engine` label, only with --tool-call-parser); vllm/parser/abstract_parser.py (when the parser is
called: once per non-streamed choice, once per streamed delta, by tool_choice and reasoning state).
"""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests.sim.conftest import MODEL, Sim, SimFactory, base_args

FAMILY = "vllm:tool_call_parser_invocations"
#: The production pod's parser flags (examples/dsv4-flash.yaml as the operator renders it).
PARSERS = ("--tool-call-parser", "deepseek_v4", "--enable-auto-tool-choice", "--reasoning-parser", "deepseek_v4")


async def _counts(s: Sim) -> dict[tuple[str, str, str], float]:
    out = {}
    for family in text_string_to_metric_families(await s.metrics_text()):
        if family.name == FAMILY:
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    assert set(sample.labels) == {"model_name", "mode", "outcome", "request_type"}
                    assert sample.labels["model_name"] == MODEL
                    key = (sample.labels["mode"], sample.labels["outcome"], sample.labels["request_type"])
                    out[key] = sample.value
    return out


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "ignore_eos": True,
            **extra}  # fmt: skip


async def _post(s: Sim, body: dict[str, Any]) -> int:
    """Send a chat; the number of streamed chunks that carried tokens (0 for a non-streamed one)."""
    deltas = 0
    async with s.session.post(s.base + "/v1/chat/completions", json=body) as resp:
        assert resp.status == 200, await resp.text()
        if not body.get("stream"):
            await resp.json()
            return 0
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("data: {"):
                choices = json.loads(line[6:])["choices"]
                deltas += bool(choices and choices[0]["delta"].get("content"))
    return deltas


NON_STREAMING = ("non_streaming", "no_tool_call", "chat_completions")
STREAMING = ("streaming", "no_tool_call", "chat_completions")


async def test_the_production_parsers_count_every_chat_choice_and_delta(sim: SimFactory) -> None:
    s = await sim(base_args(*PARSERS))
    start = await _counts(s)
    assert len(start) == 12  # every mode x outcome x request_type
    assert set(start.values()) == {0.0}  # created at 0
    await s.complete(max_tokens=4)  # completions never reach the parser
    assert await _counts(s) == start
    await _post(s, _chat())
    after_chat = await _counts(s)
    assert after_chat == {**start, NON_STREAMING: 1.0}
    # no tools: tool_choice "none", and the deepseek_v4 parsers are engine based, so each delta is parsed
    # once the prompt's `</think>` (DeepSeek-V4 chat mode) has ended reasoning
    deltas = await _post(s, _chat(stream=True, max_tokens=12))
    assert deltas > 0
    assert await _counts(s) == {**after_chat, STREAMING: float(deltas)}


async def test_no_family_without_a_tool_call_parser_and_no_count_without_auto_tool_choice(sim: SimFactory) -> None:
    plain = await sim(base_args())
    names = {f.name for f in text_string_to_metric_families(await plain.metrics_text())}
    assert FAMILY not in names
    registered = await sim(base_args("--tool-call-parser", "deepseek_v4"))
    await _post(registered, _chat())
    await _post(registered, _chat(stream=True))
    assert set((await _counts(registered)).values()) == {0.0}  # the parser exists only with auto tool choice


def _counted(parser: str, body: dict[str, Any]) -> tuple[float, float]:
    """(non-streamed, streamed) counts after one response and one delta of a chat with this body."""
    from aissim.parsers import ToolParserMetrics, tool_use

    registry = CollectorRegistry()
    m = ToolParserMetrics(
        registry=registry,
        model_name=MODEL,
        tool_call_parser=parser,
        enable_auto_tool_choice=True,
        reasoning_parser="deepseek_v4" if parser == "deepseek_v4" else None,
    )
    use = tool_use(body)
    m.on_response(use)
    m.on_delta(use)

    def value(mode: str) -> float:
        labels = {"model_name": MODEL, "mode": mode, "outcome": "no_tool_call", "request_type": "chat_completions"}
        return registry.get_sample_value(FAMILY + "_total", labels) or 0.0

    return value("non_streaming"), value("streaming")


def test_tool_choice_and_thinking_decide_whether_the_parser_is_called() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
    named = {"type": "function", "function": {"name": "f"}}
    cases: list[tuple[dict[str, Any], str, bool, bool]] = [
        # (body, parser, counted non-streamed, counted per streamed delta)
        ({}, "deepseek_v4", True, True),
        ({"tools": [tool]}, "deepseek_v4", True, True),  # tools without a choice: "auto"
        ({"tools": [tool], "tool_choice": "required"}, "deepseek_v4", False, False),
        ({"tools": [tool], "tool_choice": named}, "deepseek_v4", False, False),
        ({"tools": [tool], "tool_choice": "required"}, "glm47", True, True),  # treated as auto
        ({}, "hermes", False, False),  # tool_choice "none" reaches only an engine-based parser
        ({"tools": [tool]}, "hermes", True, True),
        ({"chat_template_kwargs": {"thinking": True}}, "deepseek_v4", True, False),  # reasoning never ends
        ({"chat_template_kwargs": {"thinking": True, "reasoning_effort": "none"}}, "deepseek_v4", True, True),
    ]
    for body, parser, whole, delta in cases:
        assert _counted(parser, body) == (float(whole), float(delta)), (body, parser)
