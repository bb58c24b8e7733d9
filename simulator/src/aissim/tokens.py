"""Deterministic stand-in tokenizer: prompt -> token count and prefix-cache block hashes, and output text.

Why this module exists: the simulator has no model or tokenizer, but prompt length drives prefill time and
KV usage, and identical prompt prefixes must hit the prefix cache (the seed's benchmark contamination:
a fixed seed regenerates the same prompt). A prompt becomes a chain of block hashes: equal prefixes give
equal leading hashes, exactly the property vLLM's block-hash prefix cache relies on.

Token counts: text is ~4 characters per token (ceil); a list of ints is taken as token ids. The sim
extension field `sim_prompt_tokens: N` in a request body asks for an N-token prompt without sending it
(a 512K-token prompt as JSON would be megabytes); its content is derived from the prompt text sent with it,
so the same text + N repeats (and hits the cache) and a different text does not.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

CHARS_PER_TOKEN = 4
_CHAT_TEMPLATE_TOKENS_PER_MESSAGE = 4  # role markers around each message, as chat templates add


@dataclass(frozen=True)
class PromptTokens:
    """A prompt as the engine sees it: its length and the hashes of its full blocks, in order."""

    num_tokens: int
    block_hashes: tuple[int, ...]
    seed: int  # identifies the content, for deterministic output and natural stop length


def text_token_ids(text: str) -> list[int]:
    """~4 characters per token; each token id is a stable hash of its characters."""
    return [zlib.crc32(text[i : i + CHARS_PER_TOKEN].encode()) % 129_280 for i in range(0, len(text), CHARS_PER_TOKEN)]


def _chain(prev: int, payload: bytes) -> int:
    digest = hashlib.blake2b(prev.to_bytes(8, "little") + payload, digest_size=8).digest()
    return int.from_bytes(digest, "little")


def from_token_ids(ids: Sequence[int], *, block_size: int) -> PromptTokens:
    """Hash full blocks of explicit token ids (the OpenAI `prompt: [int, ...]` form)."""
    hashes: list[int] = []
    prev = 0
    full = len(ids) // block_size
    for b in range(full):
        chunk = ids[b * block_size : (b + 1) * block_size]
        prev = _chain(prev, b"".join(int(t).to_bytes(4, "little", signed=True) for t in chunk))
        hashes.append(prev)
    seed = _chain(prev, len(ids).to_bytes(8, "little"))
    return PromptTokens(num_tokens=len(ids), block_hashes=tuple(hashes), seed=seed)


def synthetic(*, text: str, num_tokens: int, block_size: int) -> PromptTokens:
    """An N-token prompt whose content is keyed by `text` (the `sim_prompt_tokens` extension)."""
    base = _chain(0, text.encode())
    hashes: list[int] = []
    prev = base
    for b in range(num_tokens // block_size):
        prev = _chain(prev, b.to_bytes(8, "little"))
        hashes.append(prev)
    return PromptTokens(
        num_tokens=num_tokens,
        block_hashes=tuple(hashes),
        seed=_chain(prev, num_tokens.to_bytes(8, "little")),
    )


def from_text(text: str, *, block_size: int) -> PromptTokens:
    return from_token_ids(text_token_ids(text), block_size=block_size)


def chat_text(messages: Sequence[dict[str, object]]) -> tuple[str, int]:
    """Flatten chat messages; returns (text, template overhead tokens)."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content", "")
        if isinstance(content, list):  # OpenAI content parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"{message.get('role', 'user')}: {content}")
    return "\n".join(parts), _CHAT_TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + 1


def natural_length(seed: int) -> int:
    """How many tokens the 'model' would write before EOS for this prompt (when ignore_eos is off)."""
    return 64 + seed % 1985  # 64..2048, fixed per prompt: same prompt, same answer length


_WORDS = ("the", "engine", "steps", "through", "tokens", "and", "answers", "with", "care", "here")


def output_text(*, seed: int, start: int, count: int) -> str:
    """`count` output tokens starting at index `start`; one word per token, deterministic."""
    return "".join(_WORDS[(seed + i) % len(_WORDS)] + " " for i in range(start, start + count))
