"""A tiny model directory for the real engine (vLLM on CPU), made on the spot and never fetched.

Why: the real engine judges the operator and the simulator (tests/real, tests/fidelity, `aissim attach
--engine vllm`), and these machines reach no model hub. vLLM's `--load-format dummy` fills the weights
with random values, so all vLLM needs from disk is a config.json and a tokenizer: both are written here.

Why these sizes: a Llama with hidden size 256, 2 layers, 4 attention heads and 2 KV heads (head_dim 64;
vLLM 0.25.1's CPU attention refuses head_dim 16: "Unsupported CPU attention configuration") starts in
under two minutes on 2 cores, answers a 4-token completion in ~30 ms, and holds a 1 KiB KV footprint per
token (2 layers x K and V x 2 heads x 64 x 2 bytes), so `VLLM_CPU_KVCACHE_SPACE=1` (GiB) keeps ~1M tokens
and the production profile's `--max-model-len 327680` starts unchanged.

Why a byte-level tokenizer without merges: one token per UTF-8 byte, so a prompt of N ASCII characters is
exactly N prompt tokens on the real engine as on the simulator, and a chunked prefill's length (hence its
duration: tokens / `--max-num-batched-tokens` steps) is set by the test, not by what a trained vocabulary
happens to merge. The special tokens vLLM's DeepSeek-V4 tokenizer mode, reasoning and tool parsers look up
by id (vllm/parser/deepseek_v4.py `token_id_terminals`, vllm/tokenizers/deepseek_v4_encoding.py) are added
tokens, so the production profile's `--tokenizer-mode/--reasoning-parser/--tool-call-parser deepseek_v4`
run on the real parsers instead of being dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
_DSML = "｜DSML｜"
#: Added special tokens: the DeepSeek chat markers and the four the deepseek_v4 parser needs ids for.
SPECIAL_TOKENS = (
    BOS,
    EOS,
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    f"<{_DSML}tool_calls>",
    f"</{_DSML}tool_calls>",
)
#: Rounded up from 256 bytes + the added tokens (unused ids are never sampled by name, only by chance).
VOCAB_SIZE = 320
#: Enough for the production profile's 327680 and a longer max-model-len a test asks for.
MAX_POSITIONS = 1 << 20

CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": MAX_POSITIONS,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": VOCAB_SIZE,
    "bos_token_id": 256,
    "eos_token_id": 257,
}

#: A plain role-tagged chat template for the default tokenizer mode (the deepseek_v4 mode brings its own).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{% else %}"
    "{% if m['role'] == 'assistant' %}<｜Assistant｜>{% endif %}{% endif %}{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<｜Assistant｜>{% endif %}"
)


def byte_alphabet() -> list[str]:
    """GPT-2's reversible byte -> printable character map, the alphabet of a ByteLevel BPE (byte order)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars: dict[int, str] = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tokenizer_json() -> dict[str, Any]:
    """A HF `tokenizers` file: ByteLevel BPE with the 256 byte symbols and no merges, plus SPECIAL_TOKENS."""
    vocab = {symbol: i for i, symbol in enumerate(byte_alphabet())}
    added = [
        {"id": 256 + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False}
        | {"normalized": False, "special": True}
        for i, t in enumerate(SPECIAL_TOKENS)
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def tokenizer_config() -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "add_bos_token": False,
        "add_eos_token": False,
        "model_max_length": MAX_POSITIONS,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
    }


def files() -> dict[str, str]:
    """File name -> content of the model directory."""

    def dump(obj: Any) -> str:
        return json.dumps(obj, indent=1, ensure_ascii=False) + "\n"

    return {
        "config.json": dump(CONFIG),
        "tokenizer.json": dump(tokenizer_json()),
        "tokenizer_config.json": dump(tokenizer_config()),
        "special_tokens_map.json": dump({"bos_token": BOS, "eos_token": EOS}),
        "generation_config.json": dump({"bos_token_id": 256, "eos_token_id": 257}),
    }


def ensure(root: Path) -> Path:
    """The model directory under `root`, named by the hash of its content; written once, atomically (a
    concurrent writer's rename wins and is identical)."""
    content = files()
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]
    target = root / f"tiny-llama-{digest}"
    if (target / "config.json").is_file():
        return target
    tmp = root / f".tiny-llama-{digest}.{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    for name, text in content.items():
        (tmp / name).write_text(text, encoding="utf-8")
    try:
        tmp.rename(target)
    except OSError:  # another process made it first
        for name in content:
            (tmp / name).unlink()
        tmp.rmdir()
    return target
