"""Fresh prompt text of a requested token length, without a tokenizer (pure).

Why this module exists: the seed's first benchmark rule is a fresh prompt per request (docs/FACTS.md pitfall 1:
a fixed random seed regenerated the same prompt, the prefix cache answered, and TTFT looked absurdly fast).
Each prompt is derived from a key that names the run seed, the scenario, the point and the request index,
so two requests never share a first KV block, while a rerun with the same `--seed` deliberately repeats them
(which the prefix-cache check must then flag). Real text is sent, never a token-id list or a simulator
extension, so the same harness measures vLLM. No tokenizer is downloaded: the engine's own usage counts
give the prompt length, and `refine` turns one measured request into a characters-per-token ratio, so the
requested length is met within a few percent (the measured lengths are reported and checked).
"""

from __future__ import annotations

import hashlib
import random

# Common English words: tokenizers of every model family split them into ~1 token each, which keeps the
# characters-per-token ratio stable across lengths (the calibration measures it once per run).
_VOCABULARY = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number "
    "night point home water room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game line end member law "
    "car city community name president team minute idea kid body information back parent face others "
    "level office door health person art war history party result change morning reason research girl "
    "guy moment air teacher force education river stone garden window market bridge winter summer "
    "music letter paper energy model engine"
)
_WORDS = tuple(_VOCABULARY.split())

DEFAULT_CHARS_PER_TOKEN = 4.0


def prompt_key(seed: int, *parts: object) -> str:
    return ":".join([str(seed), *(str(p) for p in parts)])


def make_text(key: str, n_chars: int) -> str:
    """`n_chars` characters of words drawn from a generator seeded by `key`; the key's digest leads, so
    distinct keys differ from the first token on."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    rng = random.Random(digest)
    parts = [f"Note {digest[:12]}:"]
    length = len(parts[0])
    while length < n_chars:
        word = rng.choice(_WORDS)
        parts.append(word)
        length += len(word) + 1
    return " ".join(parts)[: max(n_chars, 1)]


def chars_for(tokens: int, chars_per_token: float) -> int:
    return max(1, round(tokens * chars_per_token))


def refine(chars_sent: int, tokens_measured: int) -> float:
    """The characters-per-token ratio a measured request implies."""
    if tokens_measured <= 0:
        raise ValueError("the engine reported no prompt tokens")
    return chars_sent / tokens_measured


def within(measured: int, requested: int, tolerance: float) -> bool:
    return abs(measured - requested) <= tolerance * requested


def parse_tokens(text: str) -> int:
    """`8k` -> 8192, `300K` -> 307200, `1m` -> 1048576, `1500` -> 1500."""
    raw = text.strip().lower()
    factor = 1
    if raw.endswith("k"):
        factor, raw = 1024, raw[:-1]
    elif raw.endswith("m"):
        factor, raw = 1024 * 1024, raw[:-1]
    value = int(float(raw) * factor)
    if value <= 0:
        raise ValueError(f"token count must be positive: {text!r}")
    return value
