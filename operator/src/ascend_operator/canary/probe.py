"""The kubelet readiness probe: a generation canary, run inside the engine container. Standard library only.

Outside `health/` because it does HTTP, and health is pure; it shares only the definition of progress
(`progress.py`, beside it) with the operator's health loop.

The engine image (vllm-ascend) has Python but not this package, so the pod runs this file's source, with
`progress.py` prepended (`ascend_operator.canary.source`, render/probes.py), as `python3 -c <source> PORT MODEL
MAX_TOKENS TIMEOUT PROMPT [HOST]` (an argument list, no shell). It passes when tokens come back within the
timeout or, when they do not, if the engine made forward progress meanwhile by the one definition the operator
uses too (`progress.advanced`: a counter grew or the KV gauge moved): a canary queued behind 32 busy slots
(the seed's C64 TTFT is 28.56 s because requests wait for a slot) or behind a lone chunked 512K prefill (only
the KV gauge moves for ~149 s) is a busy engine, not a dead one. /health is never consulted: it stayed 200
through the seed's 512K stall.

With an API key, the kubelet runs this probe inside the engine container, so it inherits VLLM_API_KEY
from the container's environment (a secretKeyRef) and sends it as a bearer token: the key never appears
in the probe's arguments. /metrics needs no key (vLLM guards only /v1, /v2 and /inference:
vllm/entrypoints/serve/utils/server_utils.py:42).
"""

import contextlib
import json
import os
import sys
import urllib.request
from collections.abc import Mapping

# In the operator's own environment; in the engine container progress.py's source is prepended instead.
with contextlib.suppress(ImportError):
    from ascend_operator.canary.progress import advanced, read_progress


def signals(base: str, timeout: float) -> "dict[str, float] | None":
    """The engine's progress signals, or None when /metrics does not answer."""
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=timeout) as resp:
            return read_progress(resp.read().decode())
    except OSError:
        return None


def canary(base: str, model: str, max_tokens: int, timeout: float, prompt: str, api_key: str = "") -> bool:
    """True when at least one generated token comes back in time."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(f"{base}/v1/completions", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            usage = json.load(resp).get("usage") or {}
    except (OSError, ValueError):
        return False
    return int(usage.get("completion_tokens") or 0) >= 1


def main(argv: list[str], env: Mapping[str, str] = os.environ) -> int:
    """Exit 0 when ready."""
    port, model, max_tokens, timeout, prompt = argv[0], argv[1], int(argv[2]), float(argv[3]), argv[4]
    host = argv[5] if len(argv) > 5 else "127.0.0.1"
    base = f"http://{host}:{port}"
    before = signals(base, timeout)
    if canary(base, model, max_tokens, timeout, prompt, env.get("VLLM_API_KEY", "")):
        return 0
    return 0 if advanced(before, signals(base, timeout)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
