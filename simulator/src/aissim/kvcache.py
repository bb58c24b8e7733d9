"""KV block pool and prefix cache of one simulated engine.

Why this module exists: KV usage is what the seed's long-context failure turned on (usage climbed to 97.5%
and forward progress stopped), preemption is what happens when the pool runs out, and the prefix cache is
what made the seed's repeated benchmarks look absurdly fast. The pool counts blocks of `block_size`
context tokens; its capacity is the logged token pool (1,078,120 for TP8 at 0.90, scaled with memory
utilization) divided by the hybrid-KV cost per context token (see calibration). The prefix cache keeps the
hashes of computed full prompt blocks, least recently used first out, and counts queries and hits in
tokens as vLLM's `prefix_cache_queries` / `prefix_cache_hits` do.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from aissim.calibration import KV_POOL_TOKENS_PER_CONTEXT_TOKEN


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size) if tokens > 0 else 0


class KVPool:
    """Block accounting: which request holds how many blocks; usage = used / total."""

    def __init__(self, *, pool_tokens: int, block_size: int) -> None:
        self.block_size = block_size
        self.pool_tokens = pool_tokens
        capacity_tokens = int(pool_tokens / KV_POOL_TOKENS_PER_CONTEXT_TOKEN)
        self.total_blocks = max(1, capacity_tokens // block_size)
        self.used_blocks = 0
        self._held: dict[str, int] = {}

    def max_concurrency(self, max_model_len: int) -> float:
        """Requests of max_model_len tokens the pool holds at once: vLLM's kv_cache_max_concurrency, blocks
        over blocks per request (vllm/v1/core/kv_cache_utils.py:919-937, via get_kv_cache_capacity at
        1788-1798). vLLM's per-request need counts every KV cache group, so a hybrid model's concurrency is
        below tokens / max_model_len; this pool's blocks already pay the hybrid cost per context token."""
        return self.total_blocks / blocks_for(max_model_len, self.block_size)

    @property
    def usage(self) -> float:
        return self.used_blocks / self.total_blocks

    def held(self, rid: str) -> int:
        return self._held.get(rid, 0)

    def extra_blocks(self, rid: str, context_tokens: int) -> int:
        """Blocks a request needs beyond what it holds to cover `context_tokens`."""
        return max(0, blocks_for(context_tokens, self.block_size) - self.held(rid))

    def can_grow(self, rid: str, context_tokens: int) -> bool:
        return self.used_blocks + self.extra_blocks(rid, context_tokens) <= self.total_blocks

    def grow(self, rid: str, context_tokens: int) -> None:
        extra = self.extra_blocks(rid, context_tokens)
        if self.used_blocks + extra > self.total_blocks:
            raise RuntimeError("KV pool exhausted; check can_grow first")
        self._held[rid] = self.held(rid) + extra
        self.used_blocks += extra

    def free(self, rid: str) -> None:
        self.used_blocks -= self._held.pop(rid, 0)


class PrefixCache:
    """Hashes of computed full blocks (LRU); a lookup returns the matched prefix length in tokens."""

    def __init__(self, *, capacity_blocks: int, block_size: int, enabled: bool) -> None:
        self.capacity = capacity_blocks
        self.block_size = block_size
        self.enabled = enabled
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queries = 0
        self.hits = 0

    def lookup(self, block_hashes: Sequence[int], num_tokens: int, *, count: bool) -> int:
        """Cached prefix length in tokens (never the whole prompt: the last token is always recomputed so
        the engine has logits to sample from, as in vLLM). With count=True the query and its hits are
        recorded, as when the scheduler actually admits the request."""
        if not self.enabled:
            return 0
        matched = 0
        max_blocks = (num_tokens - 1) // self.block_size
        for h in block_hashes[:max_blocks]:
            if h not in self._blocks:
                break
            if count:
                self._blocks.move_to_end(h)
            matched += 1
        hit_tokens = matched * self.block_size
        if count:
            self.queries += num_tokens
            self.hits += hit_tokens
        return hit_tokens

    def insert(self, block_hashes: Sequence[int]) -> None:
        if not self.enabled:
            return
        for h in block_hashes:
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)
