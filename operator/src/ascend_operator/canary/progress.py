"""Forward progress of an engine: the one definition the kubelet probe, the operator's canary, the stall
detector and the drift detector all use. Standard library only: render/probes.py ships this file's source
(`ascend_operator.canary.source`) inside the readiness probe, which runs with the engine image's python3,
where this package is not installed.

What moves in vLLM 0.25.1 (see docs/FACTS.md and the engine contract) and when:
- `vllm:generation_tokens_total`: per engine step that returned outputs (every decode step);
- `vllm:prompt_tokens_total`: when a request's prefill completes, not per chunk;
- `vllm:iteration_tokens_total` (histogram, its `_count`): observed only for steps that returned request
  outputs; a partial prefill chunk returns none, and vLLM has no step counter;
- `vllm:kv_cache_usage_perc`: every step, from the scheduler's stats.
So during a lone chunked prefill (the seed's 256K prefill takes 54.82 s, 512K 148.76 s) no counter moves and
only the KV gauge climbs chunk by chunk. An engine advances when any counter grows or the KV gauge moves by at
least KV_EPSILON. A counter that went backwards is an engine restart: that is not progress of this engine.
"""

from collections.abc import Mapping

COUNTERS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:iteration_tokens_total_count")
KV_GAUGE = "vllm:kv_cache_usage_perc"
#: KV usage moving by less than this is not progress (gauge rounding, block reuse).
KV_EPSILON = 1e-4

Progress = Mapping[str, float]
"""The progress signals of one instant: each of COUNTERS summed over engines, KV_GAUGE at its highest."""


def read_progress(text: str) -> dict[str, float]:
    """The progress signals from a Prometheus text exposition (only these series; labels summed or maxed)."""
    out = dict.fromkeys(COUNTERS, 0.0)
    out[KV_GAUGE] = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in out:
            continue
        try:
            value = float(line.rsplit("}", 1)[-1].split()[0])
        except (IndexError, ValueError):
            continue
        out[name] = max(out[name], value) if name == KV_GAUGE else out[name] + value
    return out


def moved(before: Progress, after: Progress) -> list[str]:
    """The signals that advanced from `before` to `after` (empty: no forward progress)."""
    signals = [name for name in COUNTERS if after.get(name, 0.0) > before.get(name, 0.0)]
    if abs(after.get(KV_GAUGE, 0.0) - before.get(KV_GAUGE, 0.0)) >= KV_EPSILON:
        signals.append(KV_GAUGE)
    return signals


def restarted(before: Progress, after: Progress) -> bool:
    """A counter went backwards: the engine process behind these samples is a new one."""
    return any(after.get(name, 0.0) < before.get(name, 0.0) for name in COUNTERS)


def advanced(before: Progress | None, after: Progress | None) -> bool:
    """True when the engine made forward progress between the two instants (unknown ends: False)."""
    if before is None or after is None or restarted(before, after):
        return False
    return bool(moved(before, after))
