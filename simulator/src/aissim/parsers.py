"""`vllm:tool_call_parser_invocations_total`: when vLLM 0.25.1's chat serving calls the tool-call parser.

Why this module exists: the production pod runs with `--tool-call-parser deepseek_v4 --enable-auto-tool-choice
--reasoning-parser deepseek_v4`, and with `--tool-call-parser` set vLLM registers one more family on /metrics
(vllm/entrypoints/openai/api_server.py:305-310, vllm/parser/metrics.py:30-61): a counter labelled model_name,
mode, outcome and request_type (no `engine`: it lives in the API server, not per engine core), its 12 series
created at 0. A dashboard or a health rule reading it must see it move on the simulator when it moves on
vLLM, and only then. The simulator has no parser; it counts the calls vLLM's parser would count.

When vLLM counts (each call of Parser.extract_tool_calls / extract_tool_calls_streaming,
vllm/parser/abstract_parser.py:572-634):
- the parser exists only with `--enable-auto-tool-choice` (vllm/parser/parser_manager.py:35-36) and is called
  only by chat completions (request_type `chat_completions`; the simulator serves no /v1/responses);
- non-streamed: once per choice, from Parser.parse (chat_completion/serving.py:879-885) through
  DelegatingParser._extract_tool_calls (abstract_parser.py:417-500): with tool_choice "none" (the default
  without tools, chat_completion/protocol.py:221-227, 831-834) only if the parsers are "engine based"
  (abstract_parser.py:130-134, 427-430); with a named or "required" tool_choice not at all when the tool
  parser supports those (abstract_parser.py:449-478); with "auto" (the default with tools) always;
- streamed: once per delta that carries tokens (chat_completion/serving.py:584-603) once reasoning has
  ended (abstract_parser.py:793-890), by the same tool_choice rule (abstract_parser.py:636-709). Reasoning
  has ended before the first token when there is no reasoning parser, or when the prompt already closes it:
  DeepSeek-V4's chat mode renders `</think>` at the end of the prompt (vllm/tokenizers/deepseek_v4_encoding.py
  390-398), its thinking mode `<think>` (then the model's own `</think>` would end it, and the simulator's
  output has none).
- outcome: `tool_call` when the parser found calls; the simulator's output text never holds any.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from prometheus_client import CollectorRegistry, Counter

#: Tool and reasoning parsers built on vLLM's ParserEngine adapters (engine_based_streaming = True,
#: vllm/parser/engine/adapters.py:45, 140): the modules vllm/tool_parsers/__init__.py and vllm/reasoning/__init__.py
#: map these names to import vllm/parser/engine/registered_adapters.py.
ENGINE_TOOL_PARSERS = frozenset(
    {"deepseek_v32", "deepseek_v4", "gemma4", "glm45", "glm47", "kimi_k2", "mimo", "minimax_m2", "qwen3_coder",
     "qwen3_xml", "seed_oss"}
)  # fmt: skip
ENGINE_REASONING_PARSERS = frozenset(
    {"deepseek_v4", "gemma4", "glm45", "glm47", "kimi_k2", "mimo", "minimax_m2", "minimax_m2_append_think",
     "nemotron_v3", "qwen3", "seed_oss"}
)  # fmt: skip
#: Tool parsers that treat a named or "required" tool_choice as "auto" (supports_required_and_named = False,
#: vllm/tool_parsers/glm47_moe_tool_parser.py:10).
NO_REQUIRED_AND_NAMED = frozenset({"glm45", "glm47"})

MODES = ("streaming", "non_streaming")
OUTCOMES = ("tool_call", "no_tool_call")  # vllm/parser/metrics.py:19-21
REQUEST_TYPES = ("chat_completions", "responses", "other")  # vllm/parser/metrics.py:24-27


@dataclass(frozen=True)
class ToolUse:
    """What a chat request asks of the tool-call parser: its effective tool_choice and thinking mode."""

    tool_choice: str
    """"none", "auto", "required", "named" or "null" (an explicit JSON null)."""
    thinking: bool = False


#: What a completion (or a chat without tools) asks: tool_choice "none".
NO_TOOLS = ToolUse("none")


def tool_use(body: Mapping[str, Any]) -> ToolUse:
    """The request's tool_choice after ChatCompletionRequest's validator (protocol.py:221-227, 831-834: "none"
    unless tools are given without one, then "auto"), and DeepSeekV4Parser's thinking switch
    (vllm/parser/deepseek_v4.py:219-223: chat_template_kwargs thinking / enable_thinking, unless
    reasoning_effort "none")."""
    if "tool_choice" in body:
        raw = body["tool_choice"]
        choice = "null" if raw is None else "named" if isinstance(raw, dict) else str(raw)
    else:
        choice = "auto" if body.get("tools") else "none"
    kwargs = body.get("chat_template_kwargs")
    kwargs = kwargs if isinstance(kwargs, dict) else {}
    thinking = bool(kwargs.get("thinking") or kwargs.get("enable_thinking")) and (
        kwargs.get("reasoning_effort") != "none"
    )
    return ToolUse(tool_choice=choice, thinking=thinking)


class ToolParserMetrics:
    """The counter (registered only with `--tool-call-parser`) and the rule that says when a chat moves it."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        model_name: str,
        tool_call_parser: str | None,
        enable_auto_tool_choice: bool,
        reasoning_parser: str | None,
    ) -> None:
        self.model_name = model_name
        self.parser = tool_call_parser if enable_auto_tool_choice else None
        self.reasoning_parser = reasoning_parser or None
        self.counter: Counter | None = None
        if tool_call_parser is None:
            return
        self.counter = Counter(
            "vllm:tool_call_parser_invocations",
            "Total number of ToolParser invocations. Non-streaming increments once per choice; "
            "streaming increments once per delta.",
            ["model_name", "mode", "outcome", "request_type"],
            registry=registry,
        )
        for mode, outcome, request_type in product(MODES, OUTCOMES, REQUEST_TYPES):
            self.counter.labels(model_name, mode, outcome, request_type)

    @property
    def engine_based(self) -> bool:
        """Parser._engine_based (abstract_parser.py:130-134): every parser it has is a ParserEngine adapter."""
        return self.parser in ENGINE_TOOL_PARSERS and (
            self.reasoning_parser is None or self.reasoning_parser in ENGINE_REASONING_PARSERS
        )

    def _calls(self, use: ToolUse) -> bool:
        """Whether _extract_tool_calls(_streaming) reaches the tool parser for this tool_choice."""
        if use.tool_choice == "none":
            return self.engine_based
        if use.tool_choice in ("named", "required"):
            return self.parser in NO_REQUIRED_AND_NAMED
        return True  # "auto", or null: auto tool choice

    def on_response(self, use: ToolUse, *, choices: int = 1) -> None:
        """A non-streamed chat response was built: one call per choice."""
        if self.counter is not None and self.parser is not None and self._calls(use):
            self.counter.labels(self.model_name, "non_streaming", "no_tool_call", "chat_completions").inc(choices)

    def on_delta(self, use: ToolUse) -> None:
        """A streamed chat delta with tokens was parsed: one call once reasoning has ended."""
        reasoning_ended = self.reasoning_parser is None or not use.thinking
        if self.counter is not None and self.parser is not None and reasoning_ended and self._calls(use):
            self.counter.labels(self.model_name, "streaming", "no_tool_call", "chat_completions").inc()
