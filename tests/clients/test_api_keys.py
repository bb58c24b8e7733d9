"""The operator's API-key cache: one Secret read per TTL, a fresh read after a 401, and no key in any repr."""

from ascend_operator.api.security import SecretKeyRef
from ascend_operator.clients.secrets import ApiKey, ApiKeyCache

REF = SecretKeyRef(name="ascend-engine-api-key", key="token")


class Store:
    """A fake API server: Secret values by (namespace, name, key), and every read recorded."""

    def __init__(self, value: str | None) -> None:
        self.value = value
        self.reads: list[tuple[str, str, str]] = []

    async def read(self, namespace: str, name: str, key: str) -> tuple[str, str] | None:
        self.reads.append((namespace, name, key))
        return None if self.value is None else (self.value, f"rv-{len(self.reads)}")


async def test_key_is_read_once_per_ttl_and_again_after_it() -> None:
    now = [0.0]
    store = Store("s3cret-value")
    cache = ApiKeyCache(read=store.read, ttl=30.0, clock=lambda: now[0])
    first = await cache.get("llm", REF)
    now[0] = 29.0
    assert await cache.get("llm", REF) == first
    assert store.reads == [("llm", "ascend-engine-api-key", "token")]
    store.value = "rotated"
    now[0] = 30.0
    rotated = await cache.get("llm", REF)
    assert first == ApiKey("s3cret-value", "rv-1")
    assert rotated == ApiKey("rotated", "rv-2")


async def test_invalidate_forces_a_fresh_read() -> None:
    store = Store("old")
    cache = ApiKeyCache(read=store.read, clock=lambda: 0.0)
    await cache.get("llm", REF)
    store.value = "new"
    cache.invalidate("llm", REF)
    key = await cache.get("llm", REF)
    assert key == ApiKey("new", "rv-2")
    assert len(store.reads) == 2


async def test_missing_secret_is_none_and_cached_like_a_value() -> None:
    store = Store(None)
    cache = ApiKeyCache(read=store.read, clock=lambda: 0.0)
    assert await cache.get("llm", REF) is None
    assert await cache.get("llm", REF) is None
    assert len(store.reads) == 1


async def test_no_repr_shows_the_value() -> None:
    store = Store("s3cret-value")
    cache = ApiKeyCache(read=store.read, clock=lambda: 0.0)
    key = await cache.get("llm", REF)
    assert "s3cret-value" not in repr(key) + repr(cache) + str(key) + repr(ApiKey("s3cret-value"))


async def test_a_rotation_keeps_the_previous_key_for_engines_started_before_it() -> None:
    now = [0.0]
    store = Store("first")
    cache = ApiKeyCache(read=store.read, ttl=30.0, clock=lambda: now[0])
    await cache.get("llm", REF)
    assert cache.previous("llm", REF) is None
    store.value = "second"
    cache.invalidate("llm", REF)
    assert await cache.get("llm", REF) == ApiKey("second", "rv-2")
    assert cache.previous("llm", REF) == ApiKey("first", "rv-1")
    now[0] = 100.0  # re-reading the same value keeps the previous one
    await cache.get("llm", REF)
    assert cache.previous("llm", REF) == ApiKey("first", "rv-1")
