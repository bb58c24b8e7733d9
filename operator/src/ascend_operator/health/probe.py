"""The kubelet readiness probe: a generation canary, run inside the engine container. Standard library only.

The engine image (vllm-ascend) has Python but not this package, so the pod runs this file's source with
`python3 -c <source> PORT MODEL MAX_TOKENS TIMEOUT PROMPT [HOST]` (an argument list, no shell). It passes when
tokens come back within the timeout, or, when they do not, if the engine made forward progress meanwhile
(generation tokens or engine steps advanced): a canary queued behind 64 busy requests (the seed's C64
TTFT is 28.56 s because requests wait for a slot) is a busy engine, not a dead one. /health is never
consulted: it stayed 200 through the seed's 512K stall.
"""

import json
import sys
import urllib.request

PROGRESS_SERIES = ("vllm:generation_tokens_total", "vllm:iteration_tokens_total_count")


def progress(base: str, timeout: float) -> float | None:
    """Sum of the forward-progress counters, or None when /metrics does not answer."""
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=timeout) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in PROGRESS_SERIES:
            total += float(line.rsplit(" ", 1)[1])
    return total


def canary(base: str, model: str, max_tokens: int, timeout: float, prompt: str) -> bool:
    """True when at least one generated token comes back in time."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    request = urllib.request.Request(
        f"{base}/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            usage = json.load(resp).get("usage") or {}
    except (OSError, ValueError):
        return False
    return int(usage.get("completion_tokens") or 0) >= 1


def main(argv: list[str]) -> int:
    """Exit 0 when ready."""
    port, model, max_tokens, timeout, prompt = argv[0], argv[1], int(argv[2]), float(argv[3]), argv[4]
    host = argv[5] if len(argv) > 5 else "127.0.0.1"
    base = f"http://{host}:{port}"
    before = progress(base, timeout)
    if canary(base, model, max_tokens, timeout, prompt):
        return 0
    after = progress(base, timeout)
    return 0 if before is not None and after is not None and after > before else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
